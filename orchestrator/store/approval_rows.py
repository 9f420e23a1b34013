"""Approvals on SQL: their views, the latest one for a version, and their one-time consumption."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, update
from sqlalchemy import select as core_select
from sqlmodel import Session

from orchestrator.core.errors import ApprovalRefused, ApproverLapsed
from orchestrator.harness.approvals import ApprovalBinding, ApprovalView
from orchestrator.store.approvers import approver_lapse, lapse_reason
from orchestrator.store.people_tables import UserRow
from orchestrator.store.row_values import aware
from orchestrator.store.tables import ApprovalRow

APPROVALS: Table = ApprovalRow.__table__  # type: ignore[attr-defined]
_USERS: Table = UserRow.__table__  # type: ignore[attr-defined]


def _approvers(column: Any) -> Any:
    """The approver's user row's `column`, read in the statement that consumes the approval."""
    return (
        core_select(column)
        .where(_USERS.c.id == APPROVALS.c.approver_id)
        .correlate(APPROVALS)
        .scalar_subquery()
    )


# Consumed once, atomically; what `lapse_reason` needs comes back with it (closed mode: any
# user at all; the approver's user row), so the approver is checked in the same round trip.
CONSUME = (
    update(APPROVALS)
    .where(
        APPROVALS.c.id == bindparam("a"),
        APPROVALS.c.consumed_at.is_(None),
        APPROVALS.c.voided_at.is_(None),
        APPROVALS.c.expires_at > bindparam("b_now", type_=APPROVALS.c.expires_at.type),
    )
    .values(consumed_at=bindparam("b_now"), consumed_by=bindparam("b_exec"))
    .returning(
        APPROVALS.c.approver_id,
        APPROVALS.c.approver,
        core_select(_USERS.c.id).limit(1).scalar_subquery().label("any_user"),
        _approvers(_USERS.c.id).label("user_id"),
        _approvers(_USERS.c.active).label("active"),
        _approvers(_USERS.c.roles).label("roles"),
        _approvers(_USERS.c.display).label("display"),
    )
)
CONSUMED_COLUMNS = ("approver_id", "approver", "any_user", "user_id", "active", "roles", "display")
APPROVAL_COLUMNS = (
    APPROVALS.c.id,
    APPROVALS.c.saga_id,
    APPROVALS.c.version,
    APPROVALS.c.version_digest,
    APPROVALS.c.destinations,
    APPROVALS.c.session,
    APPROVALS.c.approver,
    APPROVALS.c.expires_at,
    APPROVALS.c.token,
    APPROVALS.c.consumed_by,
    APPROVALS.c.voided_at,
)
# The latest approval issued for (saga, version digest): the one a call is authorized by.
LATEST_APPROVAL = (
    core_select(APPROVALS.c.id)
    .where(APPROVALS.c.saga_id == bindparam("sid"), APPROVALS.c.version_digest == bindparam("digest"))
    .order_by(APPROVALS.c.issued_at.desc())
    .limit(1)
    .scalar_subquery()
)
_APPROVAL_VIEW = core_select(*APPROVAL_COLUMNS).where(APPROVALS.c.id == LATEST_APPROVAL)


def approval_view(row: ApprovalRow) -> ApprovalView:
    return approval_of_columns(
        row.id,
        row.saga_id,
        row.version,
        row.version_digest,
        row.destinations,
        row.session,
        row.approver,
        row.expires_at,
        row.token,
        row.consumed_by,
        row.voided_at,
    )


def approval_of_columns(
    approval_id: str,
    saga_id: str,
    version: int,
    version_digest: str,
    destinations: list[str],
    session: str,
    approver: str,
    expires_at: datetime,
    token: str,
    consumed_by: str | None,
    voided_at: datetime | None,
) -> ApprovalView:
    """An approval's view from its columns, in `APPROVAL_COLUMNS` order."""
    return ApprovalView(
        approval_id=approval_id,
        binding=ApprovalBinding(
            saga_id=saga_id,
            version=version,
            version_digest=version_digest,
            destinations=tuple(destinations),
            session=session,
            approver=approver,
            expires_at=aware(expires_at),
        ),
        token=token,
        consumed_by=consumed_by,
        voided=voided_at is not None,
    )


def approval_row(binding: ApprovalBinding, token: str, *, issued_at: datetime) -> ApprovalRow:
    """The stored form of an issued approval (the inverse of `approval_view`)."""
    return ApprovalRow(
        saga_id=binding.saga_id,
        version=binding.version,
        version_digest=binding.version_digest,
        destinations=list(binding.destinations),
        session=binding.session,
        approver=binding.approver,
        issued_at=issued_at,
        expires_at=binding.expires_at,
        token=token,
    )


def approval_of(s: Session, saga_id: str, version_digest: str) -> ApprovalView | None:
    row = s.connection().execute(_APPROVAL_VIEW, {"sid": saga_id, "digest": version_digest}).first()
    return approval_of_columns(*row) if row else None


def consume_params(approval_id: str, execution: str, now: datetime) -> dict[str, Any]:
    """`CONSUME`'s parameters."""
    return {"a": approval_id, "b_now": now, "b_exec": execution}


def consume_approval(s: Session, approval_id: str, execution: str, now: datetime) -> None:
    """Consume once, atomically, unless expired at `now`; the same execution may go on using
    it. Raises `ApprovalRefused`, or `ApproverLapsed` when its approver can no longer carry
    it (`lapse_reason`: in closed mode, an active user who still holds `reviewer`)."""
    taken = s.connection().execute(CONSUME, consume_params(approval_id, execution, now)).first()
    consumed(s, approval_id, execution, now, taken)


def consumed(s: Session, approval_id: str, execution: str, now: datetime, taken: Any) -> None:
    """What `CONSUME` returned (None: it consumed nothing), checked: see `consume_approval`."""
    if taken is not None and taken.approver is not None:
        user = (taken.active, taken.roles, taken.display) if taken.user_id is not None else None
        why = lapse_reason(taken.any_user is not None, user, taken.approver)
    else:
        why = approver_lapse(s, *_consumed_before(s, approval_id, execution, now))
    if why:
        raise ApproverLapsed(why, approval_id=approval_id)


def _consumed_before(s: Session, approval_id: str, execution: str, now: datetime) -> tuple[str | None, str]:
    """Not consumed now: the approver of one this execution consumed already, or why it is refused."""
    row = s.get(ApprovalRow, approval_id)
    if row is None:
        raise ApprovalRefused("approval not found", approval_id=approval_id)
    if row.voided_at is not None:
        raise ApprovalRefused("approval was voided", approval_id=approval_id)
    if row.consumed_at is None and aware(row.expires_at) <= now:
        raise ApprovalRefused("approval expired", approval_id=approval_id)
    if row.consumed_by != execution:
        raise ApprovalRefused("approval was already used by another execution", approval_id=approval_id)
    return row.approver_id, row.approver


__all__ = [
    "APPROVALS",
    "APPROVAL_COLUMNS",
    "CONSUME",
    "CONSUMED_COLUMNS",
    "LATEST_APPROVAL",
    "approval_of",
    "approval_of_columns",
    "approval_row",
    "approval_view",
    "consume_approval",
    "consume_params",
    "consumed",
]

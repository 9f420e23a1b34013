"""What must still hold at the moment of an effect, checked where the intent commits.

The publishing tools run these checks in their pre-execute transaction (the
saga row is locked, the approval not yet consumed, no ledger row written):
whatever one raises refuses the call, rolls the intent back and leaves an
event naming the reason; nothing reaches a destination.

- `publish_bound`, `compensate_bound`, `status_bound`: a tool acts only on a
  destination the saga holds, for a version the saga has, and only in the
  states where the saga's own runner would act.
- `publish_bound` also checks the bytes (`check_bytes`), from the same read:
  the sha256 of the markdown about to be sent, recomputed now, equals the
  approved version digest (a row edited behind Pressroom's back is not
  published); the digest covers the title too (`check_title`).
- `within_roots`: a file-based destination (`site:`, `git:`), resolved now (symlinks
  followed), lies in `PRESSROOM_ALLOWED_ROOTS` when that is set.

Each raises `Refused` with a one-line reason; none calls a destination.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, bindparam, select
from sqlmodel import Session

from orchestrator.core.errors import Refused
from orchestrator.harness.digests import business_key, text_digest, version_digest
from orchestrator.store.tables import EventRow, SagaRow, StepRow, VersionRow
from sagas.destinations.registry import is_file_based
from sagas.machine import SagaState

# Where the runner publishes: `approved` (its first step) and `executing`.
PUBLISH_STATES = frozenset({SagaState.APPROVED, SagaState.EXECUTING})
# Where a destination's status is asked: while publishing, and by `reconcile`.
STATUS_STATES = frozenset({SagaState.APPROVED, SagaState.EXECUTING, SagaState.EFFECT_UNKNOWN})
# Where a step is undone, and which steps: the runner after a definite failure
# (`executing`, done steps), and an operator's `cancel` of an `effect-unknown`
# saga (done steps, and uncertain ones: the person decided), and an operator's
# `takedown` of one page of a `succeeded` saga (a done step, or one whose
# takedown failed and is asked for again). An uncertain step of a saga in any
# other state waits for `reconcile`.
COMPENSABLE: dict[SagaState, frozenset[str]] = {
    SagaState.EXECUTING: frozenset({"done"}),
    SagaState.EFFECT_UNKNOWN: frozenset({"done", "uncertain", "compensation-failed"}),
    # A takedown (`sagas.reconcile.takedown`): only with an operator's open request for that
    # destination (`takedown_requested`, written before the undo), never by any other caller.
    SagaState.SUCCEEDED: frozenset({"done", "compensation-failed"}),
}
# The events of a takedown, in the order a request goes through them.
TAKEDOWN_REQUESTED = "takedown_requested"
TAKEDOWN_EVENTS = (TAKEDOWN_REQUESTED, "taken_down", "takedown_failed")


_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_VERSIONS: Table = VersionRow.__table__  # type: ignore[attr-defined]
_STEPS: Table = StepRow.__table__  # type: ignore[attr-defined]
_EVENTS: Table = EventRow.__table__  # type: ignore[attr-defined]
# Prebuilt and narrow: the columns each check reads, no more (the markdown only where it is hashed).
_SAGA = select(
    _SAGAS.c.id, _SAGAS.c.state, _SAGAS.c.destinations, _SAGAS.c.head_version, _SAGAS.c.cancel_requested_by
).where(_SAGAS.c.id == bindparam("saga_id"))
_VERSION_NUMBER = select(_VERSIONS.c.number).where(
    _VERSIONS.c.saga_id == bindparam("saga_id"), _VERSIONS.c.digest == bindparam("digest")
)
_FAILED_STEP = (
    select(_STEPS.c.uri)
    .where(_STEPS.c.saga_id == bindparam("saga_id"), _STEPS.c.state == "failed")
    .order_by(_STEPS.c.position)
    .limit(1)
)
# Everything `publish_bound` reads, in one statement: the saga, its head version (number,
# digest and bytes; null before the first) and its first failed step. The version is found by
# its number (the head's) and then its digest is compared: two versions may hold the same bytes
# (an edit taken back, a rejected edit redrafted), so a digest alone names no version.
_PUBLISH_READ = (
    select(
        *_SAGA.selected_columns,
        _VERSIONS.c.number,
        _VERSIONS.c.digest,
        _VERSIONS.c.title,
        _VERSIONS.c.markdown,
        _FAILED_STEP.scalar_subquery().label("failed"),
    )
    .select_from(
        _SAGAS.outerjoin(
            _VERSIONS, (_VERSIONS.c.saga_id == _SAGAS.c.id) & (_VERSIONS.c.number == _SAGAS.c.head_version)
        )
    )
    .where(_SAGAS.c.id == bindparam("saga_id"))
)
_TAKEDOWNS = (
    select(_EVENTS.c.status, _EVENTS.c.detail)
    .where(
        _EVENTS.c.saga_id == bindparam("saga_id"),
        _EVENTS.c.kind == "saga",
        _EVENTS.c.status.in_(TAKEDOWN_EVENTS),
    )
    .order_by(_EVENTS.c.seq.desc())
)
_STEP = select(_STEPS.c.state, _STEPS.c.idempotency_key).where(
    _STEPS.c.saga_id == bindparam("saga_id"), _STEPS.c.uri == bindparam("uri")
)


def _reads(session: Session) -> Connection:
    """The transaction's connection, with whatever the session holds written first: a check
    joined to a caller's unit of work sees that unit's own changes."""
    session.flush()
    return session.connection()


def _saga(conn: Connection, saga_id: str, destination: str) -> Any:
    """The saga's id, state, destinations, head version and cancel request (one row)."""
    return _held(conn.execute(_SAGA, {"saga_id": saga_id}).first(), saga_id, destination)


def _held(saga: Any, saga_id: str, destination: str) -> Any:
    """The saga's row, when there is one and it holds the destination."""
    if saga is None:
        raise Refused(f"no saga {saga_id!r}; nothing was sent", saga_id=saga_id)
    if destination not in saga.destinations:
        raise Refused(
            f"{destination} is not a destination of saga {saga.id}; nothing was sent", saga_id=saga.id
        )
    return saga


def _version_number(conn: Connection, saga_id: str, digest: str) -> int:
    return _known(
        conn.execute(_VERSION_NUMBER, {"saga_id": saga_id, "digest": digest}).scalar(), saga_id, digest
    )


def _known(number: int | None, saga_id: str, digest: str) -> int:
    if number is None:
        raise Refused(
            f"saga {saga_id} has no version with digest {digest[:12]}…; nothing was sent", saga_id=saga_id
        )
    return int(number)


def publish_bound(session: Session, saga_id: str, destination: str, digest: str) -> None:
    """`publish` names a destination of an approved or executing saga, and the digest of its
    head version, whose bytes hash, now, to that digest: one read."""
    saga = _held(_reads(session).execute(_PUBLISH_READ, {"saga_id": saga_id}).first(), saga_id, destination)
    if SagaState(saga.state) not in PUBLISH_STATES:
        raise Refused(
            f"saga {saga.id} is {saga.state}; publishing needs approved or executing", saga_id=saga.id
        )
    if saga.number is None or saga.digest != digest:
        raise Refused(f"digest {digest[:12]}… is not the head version of saga {saga.id}", saga_id=saga.id)
    # Halted: nothing more is published in this execution, whoever calls.
    if saga.cancel_requested_by:
        raise Refused(
            f"saga {saga.id}: a cancel was asked for by {saga.cancel_requested_by}; nothing was sent"
        )
    if saga.failed is not None:
        raise Refused(f"saga {saga.id}: step {saga.failed} failed; nothing more is published until a retry")
    check_bytes(saga.markdown, digest, version=saga.number, title=saga.title)


def status_bound(session: Session, saga_id: str, destination: str, digest: str) -> None:
    """`publish.status` asks only about a destination the saga holds, while it publishes or is reconciled."""
    conn = _reads(session)
    saga = _saga(conn, saga_id, destination)
    _version_number(conn, saga.id, digest)
    if SagaState(saga.state) not in STATUS_STATES:
        raise Refused(
            f"saga {saga.id} is {saga.state}; its destinations are asked only while it publishes "
            "or is reconciled",
            saga_id=saga.id,
        )


def compensate_bound(session: Session, saga_id: str, destination: str, digest: str) -> None:
    """`publish.compensate` undoes only a step of this saga, in a state where its runner would."""
    conn = _reads(session)
    saga = _saga(conn, saga_id, destination)
    key = business_key(saga.id, destination, digest)
    step = conn.execute(_STEP, {"saga_id": saga.id, "uri": destination}).first()
    if step is None or step.idempotency_key != key:
        raise Refused(f"saga {saga.id} has no step {destination} under this version; nothing was undone")
    allowed = COMPENSABLE.get(SagaState(saga.state), frozenset())
    if step.state in ("uncertain", "compensation-failed") and step.state not in allowed:
        raise Refused(f"step {destination} is {step.state}: it waits for reconcile; nothing was undone")
    if step.state not in allowed:
        raise Refused(
            f"saga {saga.id} is {saga.state} and step {destination} is {step.state}: not compensated "
            "(an operator's cancel or takedown is the way); nothing was undone",
            saga_id=saga.id,
        )
    if SagaState(saga.state) is SagaState.SUCCEEDED and not _takedown_open(conn, saga.id, destination):
        raise Refused(
            f"saga {saga.id} is succeeded: {destination} is undone only by an operator's takedown; "
            "nothing was undone",
            saga_id=saga.id,
        )


def _takedown_open(conn: Connection, saga_id: str, destination: str) -> bool:
    """Is the latest takedown event for `destination` a request not yet carried out?"""
    rows = conn.execute(_TAKEDOWNS, {"saga_id": saga_id}).all()
    latest = next((r.status for r in rows if (r.detail or {}).get("destination") == destination), None)
    return latest == TAKEDOWN_REQUESTED


def check_bytes(markdown: str, digest: str, *, version: int, title: str) -> None:
    """What will be published, its title and its markdown, gives the approved digest
    (`digests.version_digest`)."""
    check_title(title, markdown, digest, version=version)
    actual = version_digest(title, markdown)
    if actual != digest:
        raise Refused(
            f"integrity: the bytes of version {version} hash to {actual[:12]}…, not the approved "
            f"digest {digest[:12]}…; nothing was sent",
            version=version,
        )


def check_title(title: str, markdown: str, digest: str, *, version: int) -> None:
    """The markdown is the approved one but the title beside it is not: say so."""
    if version_digest(title, markdown) != digest and text_digest(markdown) == digest:
        raise Refused(
            f"integrity: the title of version {version} ({title[:60]!r}) is not the approved one "
            f"(digest {digest[:12]}…); nothing was sent",
            version=version,
        )


def resolved_target(uri: str) -> Path | None:
    """The folder a `site:`/`git:` URI names, resolved now (symlinks followed); None for other schemes."""
    if not is_file_based(uri):
        return None
    target = uri.partition(":")[2]
    return Path(os.path.realpath(os.path.expanduser(target)))


def within_roots(uri: str, roots: Sequence[Path]) -> None:
    """With allowed roots set, a file destination must resolve, now, inside one of them."""
    if not roots:
        return
    real = resolved_target(uri)
    if real is None:
        return
    if not any(real == root or real.is_relative_to(root) for root in roots):
        raise Refused(
            f"{uri} resolves to {real}, outside the allowed roots (PRESSROOM_ALLOWED_ROOTS); nothing was sent"
        )


__all__ = [
    "COMPENSABLE",
    "PUBLISH_STATES",
    "STATUS_STATES",
    "check_bytes",
    "compensate_bound",
    "publish_bound",
    "resolved_target",
    "status_bound",
    "within_roots",
]

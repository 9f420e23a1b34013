"""Changes to publishing steps: every change of a step's state writes its event.

The `step` event (status: the new state; detail: destination, key, version
digest) commits with the step row in the caller's unit of work, so the saga
reducer (`sagas.reducer`) can rebuild every step from the events alone.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, bindparam, insert, select, update
from sqlmodel import Session, col
from sqlmodel import select as sql_select

from orchestrator.store.events import WithEvent, add_event
from orchestrator.store.tables import EventRow, SagaRow, StepRow, new_id, utcnow
from sagas.step_states import StepState

STEP_EVENT = "step"


def set_step(
    session: Session, step: StepRow, state: StepState, *, actor: str, reason: str | None = None
) -> None:
    """Move `step` to `state` and record it (its key and receipt are the caller's to set first).
    `reason`: why (say, the cause of a failure), kept in the event for whoever reads it later."""
    step.state = state.value
    step.updated_at = utcnow()
    session.add(step)
    detail: dict[str, Any] = {
        "destination": step.uri,
        "position": step.position,
        "key": step.idempotency_key,
        "version_digest": step.version_digest,
    }
    if reason:
        detail["reason"] = reason
    add_event(session, saga_id=step.saga_id, actor=actor, kind=STEP_EVENT, status=state.value, detail=detail)


def step_reason(session: Session, step: StepRow) -> str | None:
    """The reason recorded when `step` last entered its present state, if one was."""
    rows = session.exec(
        sql_select(EventRow.detail)
        .where(EventRow.saga_id == step.saga_id, EventRow.kind == STEP_EVENT, EventRow.status == step.state)
        .order_by(col(EventRow.seq).desc())
    ).all()
    for detail in rows:
        if detail.get("destination") == step.uri:
            reason = detail.get("reason")
            return str(reason) if reason else None
    return None


_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_STEPS: Table = StepRow.__table__  # type: ignore[attr-defined]
# A step's row (none yet: nulls) and the saga's destinations, whose order is its position.
_STEP_OF = (
    select(_SAGAS.c.destinations, _STEPS.c.id, _STEPS.c.position)
    .select_from(
        _SAGAS.outerjoin(_STEPS, (_STEPS.c.saga_id == _SAGAS.c.id) & (_STEPS.c.uri == bindparam("uri")))
    )
    .where(_SAGAS.c.id == bindparam("saga_id"))
)
_STEP_VALUES = ("state", "idempotency_key", "receipt", "version_digest", "updated_at")
_STEP_NEW = WithEvent(
    insert(_STEPS).values(
        {
            name: bindparam(name, type_=_STEPS.c[name].type)
            for name in ("id", "saga_id", "position", "uri", *_STEP_VALUES)
        }
    )
)
_STEP_CHANGE = WithEvent(
    update(_STEPS)
    .where(_STEPS.c.id == bindparam("b_id"))
    .values(
        state=bindparam("state"),
        idempotency_key=bindparam("idempotency_key"),
        receipt=bindparam("receipt", type_=_STEPS.c.receipt.type),
        version_digest=bindparam("version_digest"),
        updated_at=bindparam("updated_at", type_=_STEPS.c.updated_at.type),
    )
)


def put_step(
    session: Session,
    saga_id: str,
    uri: str,
    state: StepState,
    *,
    actor: str,
    key: str,
    receipt: dict[str, Any] | None,
    version_digest: str,
) -> None:
    """`set_step` for a hot path (the publish's result): the step of `uri` made (or moved to)
    `state` with its key, receipt and version, and its event, on prebuilt statements (the
    row and its event in one round trip on PostgreSQL). The
    caller holds the saga's lock (its chain), so the step read here cannot change under it."""
    conn = session.connection()
    destinations, step_id, position = conn.execute(_STEP_OF, {"saga_id": saga_id, "uri": uri}).one()
    values = {
        "state": state.value,
        "idempotency_key": key,
        "receipt": receipt,
        "version_digest": version_digest,
        "updated_at": utcnow(),
    }
    if step_id is None:
        position = destinations.index(uri)
        statement, params = _STEP_NEW, {"id": new_id(), "saga_id": saga_id, "position": position, "uri": uri}
    else:
        statement, params = _STEP_CHANGE, {"b_id": step_id}
    detail = {"destination": uri, "position": position, "key": key, "version_digest": version_digest}
    statement.execute(
        session,
        {**params, **values},
        saga_id=saga_id,
        actor=actor,
        kind=STEP_EVENT,
        status=state.value,
        detail=detail,
    )


__all__ = ["STEP_EVENT", "put_step", "set_step", "step_reason"]

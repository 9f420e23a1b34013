"""The ledger on SQL, and its one writer: a key's row pending, its outcome, a person's
settlement, and retention's removal of old rows (`prune`).

Every statement that writes the `ledger` table is here (`tests/unit/test_record_writers.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Insert, Table, bindparam, delete, func, update
from sqlalchemy import select as core_select
from sqlalchemy.engine import Connection
from sqlmodel import Session

from orchestrator.core.errors import IdempotencyConflict, KeyInFlight, NotFound
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.ledger_status import RESTARTABLE, LedgerStatus
from orchestrator.harness.ports import LedgerView
from orchestrator.store.adapter import StorageAdapter, adapter_for
from orchestrator.store.events import ChainedEvent, WithEvent, add_event, hold_chain
from orchestrator.store.row_values import aware, bound
from orchestrator.store.tables import LedgerRow, new_id

# The write path's statements, built once and run on the call's connection
# (as the consumer's are): no ORM execution path, no identity map to keep.
_LEDGER: Table = LedgerRow.__table__  # type: ignore[attr-defined]
_LEDGER_HELD = (
    core_select(_LEDGER.c.args_digest, _LEDGER.c.status, _LEDGER.c.claimed_until)
    .where(_LEDGER.c.key == bindparam("k"))
    .with_for_update()
)
_LEDGER_NEW_COLUMNS = (
    "key",
    "tool",
    "saga_id",
    "args_digest",
    "status",
    "attempts",
    "claimed_until",
    "created_at",
    "updated_at",
)


def ledger_new(adapter: StorageAdapter) -> Insert:
    """A key's first call: its row, unless one is there (then read, locked: `ledger_known`)."""
    new: Insert = (
        adapter.insert_ignoring(_LEDGER, [_LEDGER.c.key])
        .values(bound(_LEDGER, _LEDGER_NEW_COLUMNS, "l_"))
        .returning(_LEDGER.c.key)
    )
    return new


_LEDGER_AGAIN = (
    update(_LEDGER)
    .where(_LEDGER.c.key == bindparam("k"))
    .values(
        status=LedgerStatus.PENDING.value,
        attempts=_LEDGER.c.attempts + 1,
        claimed_until=bindparam("b_until", type_=_LEDGER.c.claimed_until.type),
        updated_at=bindparam("b_now", type_=_LEDGER.c.updated_at.type),
    )
)
# A key's outcome on its ledger row (binds `b_status`, `b_result`, `b_event`, `b_now`).
_OUTCOME = {
    "status": bindparam("b_status"),
    "result": bindparam("b_result", type_=_LEDGER.c.result.type),
    "event_id": bindparam("b_event"),
    "updated_at": bindparam("b_now", type_=_LEDGER.c.updated_at.type),
}
_LEDGER_FINISH = WithEvent(update(_LEDGER).where(_LEDGER.c.key == bindparam("k")).values(_OUTCOME))
# One statement (PostgreSQL), for a result whose transaction does not hold the saga yet: the
# saga's lock, the outcome and the result event. The ledger row waits for the saga's lock
# (`after_head`), so the locks come in `begin_effect`'s order: the saga, then the row.
_RESULT_EVENT = ChainedEvent("result_event")
_, _RESULT_WRITTEN = _RESULT_EVENT.ctes()
_LEDGER_FINISHED = (
    update(_LEDGER)
    .where(_LEDGER.c.key == bindparam("k"), _RESULT_EVENT.after_head())
    .values(_OUTCOME)
    .returning(_LEDGER.c.key)
    .cte("finished")
)
_LEDGER_FINISH_HOLDING = core_select(
    core_select(_LEDGER_FINISHED.c.key).exists(),  # first: the order is the gate's alone
    _RESULT_EVENT.head_of(),
    _RESULT_EVENT.hash_of(_RESULT_WRITTEN),
)
LEDGER_COLUMNS = (
    _LEDGER.c.key,
    _LEDGER.c.tool,
    _LEDGER.c.saga_id,
    _LEDGER.c.args_digest,
    _LEDGER.c.status,
    _LEDGER.c.result,
    _LEDGER.c.attempts,
    _LEDGER.c.claimed_until,
)
_LEDGER_VIEW = core_select(*LEDGER_COLUMNS).where(_LEDGER.c.key == bindparam("k"))


def ledger_view(
    key: str,
    tool: str,
    saga_id: str | None,
    args_digest: str,
    status: str,
    result: dict[str, Any] | None,
    attempts: int,
    claimed_until: datetime | None,
) -> LedgerView:
    """A ledger row's view from its columns, in `LEDGER_COLUMNS` order."""
    return LedgerView(
        key=key,
        tool=tool,
        saga_id=saga_id,
        args_digest=args_digest,
        status=status,
        result=result,
        attempts=attempts,
        claimed_until=claimed_until,
    )


def ledger_row(s: Session, key: str) -> LedgerView | None:
    row = s.connection().execute(_LEDGER_VIEW, {"k": key}).first()
    return ledger_view(*row) if row else None


def ledger_pending(
    s: Session, key: str, state: AgentState, saga_id: str | None, now: datetime, until: datetime
) -> None:
    """The key's ledger row `pending`, claimed until `until`: a new row, or a restartable one again."""
    conn = s.connection()
    # A concurrent first call of the same key waits here for the other's transaction: its
    # row, once committed, is read below (in flight); rolled back, this insert goes ahead.
    new = ledger_values(key, state, saga_id, now, until)
    if conn.execute(adapter_for(conn).built(ledger_new), new).first() is None:
        ledger_known(s, key, state, now, until)


def ledger_values(
    key: str, state: AgentState, saga_id: str | None, now: datetime, until: datetime
) -> dict[str, Any]:
    """A new ledger row's parameters for `ledger_new`."""
    return {
        "l_key": key,
        "l_tool": state.tool,
        "l_saga_id": saga_id,
        "l_args_digest": state.args_digest,
        "l_status": LedgerStatus.PENDING.value,
        "l_attempts": 1,
        "l_claimed_until": until,
        "l_created_at": now,
        "l_updated_at": now,
    }


def ledger_known(s: Session, key: str, state: AgentState, now: datetime, until: datetime) -> None:
    """The key has a row already: read it locked, and pend it again if it may restart."""
    conn = s.connection()
    args_digest, status, claimed_until = conn.execute(_LEDGER_HELD, {"k": key}).one()
    if args_digest != state.args_digest:
        raise IdempotencyConflict(f"key {key} was used with other arguments", key=key)
    if status == LedgerStatus.PENDING and claimed_until is not None and aware(claimed_until) > now:
        raise KeyInFlight(f"key {key} is in flight", key=key)
    if status not in RESTARTABLE:
        raise IdempotencyConflict(f"key {key} is {status}", key=key)
    conn.execute(_LEDGER_AGAIN, {"k": key, "b_until": until, "b_now": now})


def finish_ledger(
    s: Session, key: str, status: str, result: dict[str, Any] | None, event: dict[str, Any], now: datetime
) -> str:
    """The key's outcome on its ledger row (none there: nothing to finish) and its result's
    `event` (`insert_event`'s fields), in one round trip on PostgreSQL; the event's id."""
    event_id: str = event.get("event_id") or new_id()
    values = {"k": key, "b_status": status, "b_result": result, "b_event": event_id, "b_now": now}
    saga_id = event.get("saga_id")
    if ChainedEvent.takes_chain(s, saga_id):
        # The saga is not held yet: the statement takes its lock first, then the row.
        linked = ChainedEvent.params(s, **{**event, "event_id": event_id})
        _finished, head, new_hash = s.connection().execute(_LEDGER_FINISH_HOLDING, {**values, **linked}).one()
        ChainedEvent.written(s, linked, head, new_hash)
        return event_id
    if saga_id is not None:
        hold_chain(s, saga_id)  # the saga before the ledger row, as begin_effect locks them
    _LEDGER_FINISH.execute(s, values, **{**event, "event_id": event_id})
    return event_id


def settle_by_person(
    s: Session,
    key: str,
    outcome: Literal["confirmed", "absent"],
    receipt: dict[str, Any] | None,
    *,
    actor: str,
    reason: str,
    detail: dict[str, Any] | None,
    now: datetime,
) -> None:
    """A person's `reconcile` of `key` (the caller holds its saga's chain): `done` with the
    receipt, or `absent`; its `reconcile` event. Raises `NotFound` when no row holds `key`."""
    row = s.get(LedgerRow, key, with_for_update=True)
    if row is None:
        raise NotFound(f"no ledger row {key}", key=key)
    confirmed = outcome == "confirmed"
    row.status = LedgerStatus.DONE if confirmed else LedgerStatus.ABSENT
    row.result = dict(receipt or {"reconciled_by": actor}) if confirmed else None
    row.updated_at = now
    s.add(row)
    ev = add_event(
        s,
        saga_id=row.saga_id,
        actor=actor,
        kind="reconcile",
        status=outcome,
        tool=row.tool,
        detail={**(detail or {}), "key": key, "reason": reason, "outcome": outcome},
    )
    row.event_id = ev.event_id


def mark_uncertain(s: Session, key: str, now: datetime) -> bool:
    """`pending` or `uncertain` made `uncertain`; False, changing nothing, otherwise."""
    row = s.get(LedgerRow, key, with_for_update=True)
    if row is None or row.status not in (LedgerStatus.PENDING, LedgerStatus.UNCERTAIN):
        return False
    row.status = LedgerStatus.UNCERTAIN
    row.updated_at = now
    s.add(row)
    return True


def prune(conn: Connection, saga_ids: Sequence[str], cutoff: datetime, *, count_only: bool = False) -> int:
    """Remove the rows of `saga_ids` last changed before `cutoff` (with `count_only`, count them)."""
    where = _LEDGER.c.saga_id.in_(saga_ids) & (_LEDGER.c.updated_at < cutoff)
    if count_only:
        counted: int = conn.execute(core_select(func.count()).select_from(_LEDGER).where(where)).scalar_one()
        return counted
    return int(conn.execute(delete(_LEDGER).where(where)).rowcount or 0)


__all__ = [
    "LEDGER_COLUMNS",
    "finish_ledger",
    "ledger_known",
    "ledger_new",
    "ledger_pending",
    "ledger_row",
    "ledger_values",
    "ledger_view",
    "mark_uncertain",
    "prune",
    "settle_by_person",
]

"""The `saga_budgets` table and its one writer: a saga's durable spending.

One row per saga (created by its first charge): tool calls, model tokens and
cost spent by its agents. `charge` runs inside the caller's transaction (the
intent of a write, the result of a read), so what was charged commits with
what it paid for, and a turn re-run after a crash continues the count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Insert, Select, Table, bindparam, select
from sqlmodel import Field, Session, SQLModel

from orchestrator.harness.budget import Charge, Spent, exhausted, over
from orchestrator.store.adapter import StorageAdapter, adapter_for
from orchestrator.store.events import ChainedEvent, WithEvent
from orchestrator.store.tables import utcnow


class SagaBudgetRow(SQLModel, table=True):
    __tablename__ = "saga_budgets"

    saga_id: str = Field(primary_key=True)
    calls: int = Field(default=0, description="tool calls charged (replays are not)")
    tokens: int = Field(default=0, description="model tokens a model planner reported")
    cost: float = Field(default=0.0, sa_type=Float, description="model cost, in the provider's unit")
    updated_at: datetime = Field(default_factory=utcnow)


_TABLE: Table = SagaBudgetRow.__table__  # type: ignore[attr-defined]


_CHARGED = {
    "saga_id": "b_saga",
    "calls": "b_calls",
    "tokens": "b_tokens",
    "cost": "b_cost",
    "updated_at": "b_now",
}


def _charge_statement(adapter: StorageAdapter, *, limited: bool) -> Insert:
    """One statement per charge: the saga's row is created by its first charge and added to
    after that; with a limit, the addition is made only while it stays within the limit
    (nothing comes back when it would not). Prebuilt, run on the caller's connection."""
    new = adapter.insert(_TABLE).values(
        {c: bindparam(b, type_=_TABLE.c[c].type) for c, b in _CHARGED.items()}
    )
    return _added(new, limited=limited)


def _added(new: Any, *, limited: bool) -> Insert:
    """`new`, an INSERT of one charge, made the saga's row or an addition to it."""
    add = {
        "calls": _TABLE.c.calls + new.excluded.calls,
        "tokens": _TABLE.c.tokens + new.excluded.tokens,
        "cost": _TABLE.c.cost + new.excluded.cost,
        "updated_at": new.excluded.updated_at,
    }
    within = _TABLE.c.calls + new.excluded.calls <= bindparam("b_limit") if limited else None
    upsert: Insert = new.on_conflict_do_update(index_elements=[_TABLE.c.saga_id], set_=add, where=within)
    return upsert.returning(_TABLE.c.calls, _TABLE.c.tokens, _TABLE.c.cost)


@dataclass(frozen=True)
class _Charges:
    """A database's charge statements, by whether the charge has a limit."""

    alone: dict[bool, Insert]
    # The same, each with an event written along (`WithEvent`): a read's charge and its result.
    with_event: dict[bool, WithEvent]
    # One statement that takes the saga's lock too (`_charge_holding`), where the database has one.
    holding: dict[bool, Select[Any]]


def _charges(adapter: StorageAdapter) -> _Charges:
    alone = {limited: _charge_statement(adapter, limited=limited) for limited in (False, True)}
    holding = (
        {limited: _charge_holding(adapter, limited=limited) for limited in (False, True)}
        if adapter.one_statement_writes
        else {}
    )
    return _Charges(alone, {limited: WithEvent(st) for limited, st in alone.items()}, holding)


def _charge_holding(adapter: StorageAdapter, *, limited: bool) -> Select[Any]:
    """One statement (PostgreSQL), for a charge with its event whose transaction does not hold the saga yet:
    the saga's lock, the charge and the event in one statement. The charge waits for the
    lock (`after_head`), so the saga is locked before its budget row, as an intent locks
    them; its columns come first, so that order is the gate's alone."""
    event = ChainedEvent("charge_event")
    _, written = event.ctes()
    values = select(*(bindparam(b, type_=_TABLE.c[c].type) for c, b in _CHARGED.items())).where(
        event.after_head()
    )
    charged_row = _added(adapter.insert(_TABLE).from_select(list(_CHARGED), values), limited=limited).cte(
        "charged"
    )
    return select(
        *(select(column).scalar_subquery() for column in charged_row.c),
        event.head_of(),
        event.hash_of(written),
    )


def charge(s: Session, c: Charge, *, event: dict[str, Any] | None = None) -> Spent:
    """Add `c` to its saga's row, atomically, in one statement; raises `BudgetExhausted`
    (changing nothing) when over. With `event` (`insert_event`'s fields), that event is
    written by the same statement on PostgreSQL; over the limit, the caller's rollback
    takes it back with the rest."""
    refuse_over(s, c)
    conn = s.connection()
    statements, limited = adapter_for(conn).built(_charges), c.limit > 0
    params = charge_params(c, utcnow())
    row: Any
    if event is None:
        row = conn.execute(statements.alone[limited], params).first()
    elif ChainedEvent.takes_chain(s, event.get("saga_id")):
        linked = ChainedEvent.params(s, **event)
        *row, head, new_hash = conn.execute(statements.holding[limited], {**params, **linked}).one()
        ChainedEvent.written(s, linked, head, new_hash)
    else:  # the event's link is hashed here, onto a head held first (`WithEvent`)
        row = statements.with_event[limited].execute(s, params, **event).first()
    return charged(s, c, row)


def charge_statement(adapter: StorageAdapter, c: Charge) -> Insert:
    """`c`'s charge statement, for a caller that runs it inside a statement of its own (its
    parameters: `charge_params`; what it returns: `charged`)."""
    return adapter.built(_charges).alone[c.limit > 0]


def charge_params(c: Charge, now: datetime) -> dict[str, Any]:
    return {
        "b_saga": c.saga_id,
        "b_calls": c.calls,
        "b_tokens": c.tokens,
        "b_cost": c.cost,
        "b_now": now,
        "b_limit": c.limit,
    }


def refuse_over(s: Session, c: Charge) -> None:
    """Before any statement: a charge over the limit even as the saga's first is refused."""
    if over(Spent(), c):
        raise exhausted(c, spent(s, c.saga_id))


def charged(s: Session, c: Charge, row: Any) -> Spent:
    """What the charge statement returned (calls, tokens, cost), or `BudgetExhausted` when it
    returned nothing: the row is there and the charge would go over, so nothing was added."""
    if row is None or row[0] is None:
        raise exhausted(c, spent(s, c.saga_id))
    return Spent(calls=row[0], tokens=row[1], cost=row[2])


def spent(s: Session, saga_id: str) -> Spent:
    row = s.get(SagaBudgetRow, saga_id, populate_existing=True)
    return Spent(row.calls, row.tokens, row.cost) if row else Spent()


__all__ = ["SagaBudgetRow", "charge", "charge_params", "charge_statement", "charged", "refuse_over", "spent"]

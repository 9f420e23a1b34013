"""The `saga_budgets` table and its one writer: a saga's durable spending.

One row per saga (created by its first charge): tool calls, model tokens and
cost spent by its agents. `charge` runs inside the caller's transaction (the
intent of a write, the result of a read), so what was charged commits with
what it paid for, and a turn re-run after a crash continues the count.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, Table, bindparam, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Field, Session, SQLModel

from orchestrator.harness.budget import Charge, Spent, exhausted, over
from orchestrator.store.tables import utcnow


class SagaBudgetRow(SQLModel, table=True):
    __tablename__ = "saga_budgets"

    saga_id: str = Field(primary_key=True)
    calls: int = Field(default=0, description="tool calls charged (replays are not)")
    tokens: int = Field(default=0, description="model tokens a model planner reported")
    cost: float = Field(default=0.0, sa_type=Float, description="model cost, in the provider's unit")
    updated_at: datetime = Field(default_factory=utcnow)


_TABLE: Table = SagaBudgetRow.__table__  # type: ignore[attr-defined]
_BUMP = (
    update(_TABLE)
    .where(_TABLE.c.saga_id == bindparam("b_saga"))
    .values(
        calls=_TABLE.c.calls + bindparam("b_calls"),
        tokens=_TABLE.c.tokens + bindparam("b_tokens"),
        cost=_TABLE.c.cost + bindparam("b_cost", type_=Float()),
        updated_at=bindparam("b_now", type_=_TABLE.c.updated_at.type),
    )
    .returning(_TABLE.c.calls, _TABLE.c.tokens, _TABLE.c.cost)
)
# Prebuilt (run on the caller's connection, as every write of the harness's path).
_BUMP_WITHIN = _BUMP.where(_TABLE.c.calls + bindparam("b_calls") <= bindparam("b_limit"))


def charge(s: Session, c: Charge) -> Spent:
    """Add `c` to its saga's row, atomically; raises `BudgetExhausted` (changing nothing) when over."""
    conn = s.connection()
    bump = _BUMP_WITHIN if c.limit > 0 else _BUMP
    params = {
        "b_saga": c.saga_id,
        "b_calls": c.calls,
        "b_tokens": c.tokens,
        "b_cost": c.cost,
        "b_now": utcnow(),
        "b_limit": c.limit,
    }
    row = conn.execute(bump, params).first()
    if row is not None:
        return Spent(calls=row[0], tokens=row[1], cost=row[2])
    existing = s.get(SagaBudgetRow, c.saga_id)
    if existing is not None:  # the row is there and the charge would go over
        raise exhausted(c, Spent(existing.calls, existing.tokens, existing.cost))
    first = Spent()
    if over(first, c):
        raise exhausted(c, first)
    values = {"saga_id": c.saga_id, "calls": 0, "tokens": 0, "cost": 0.0, "updated_at": utcnow()}
    dialect = s.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    conn.execute(insert(_TABLE).values(**values).on_conflict_do_nothing(index_elements=["saga_id"]))
    row = conn.execute(bump, params).first()
    if row is None:  # a concurrent charge took the last call between the two statements
        got = s.get(SagaBudgetRow, c.saga_id, populate_existing=True)
        raise exhausted(c, Spent(got.calls, got.tokens, got.cost) if got else first)
    return Spent(calls=row[0], tokens=row[1], cost=row[2])


def spent(s: Session, saga_id: str) -> Spent:
    row = s.get(SagaBudgetRow, saga_id)
    return Spent(row.calls, row.tokens, row.cost) if row else Spent()


__all__ = ["SagaBudgetRow", "charge", "spent"]

"""The `model_calls` table and its one writer: every model call of a saga, durable.

A call is recorded in three short transactions and never inside one of its
caller's: its intent (state `intent`) before the request is sent, then its
reply (`answered`) or its failure (`failed`) once the endpoint has spoken. No
function here holds a transaction while a model is asked.

- The key is `call_key(saga, role, round, request digest)`
  (`orchestrator.harness.model_calls`): the same request in the same turn
  finds its reply here and is not sent again; another request is another call.
- `seq` orders a saga's calls: the next number when the intent is first
  recorded, unique per saga (two intents that drew the same number at once:
  the loser draws again).
- A reply commits with its `model` event (status `answered`) and with the
  tokens and cost charged to the saga's `saga_budgets` row (no tool call is
  counted), under the saga's lock, so a reply recorded twice at once is
  charged and logged once.
- `usage` sums the answered calls: what a saga, and each of its roles, spent
  (`spent_by_role`: the same sums by role, read on a caller's connection).

The table itself is `orchestrator.store.model_call_rows.ModelCallRow` (apart, so
the schema module can register it without importing the units of work).
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import Table, func
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from orchestrator.harness.budget import Charge
from orchestrator.harness.model_calls import CallAnswer, CallIntent, CallRecord, CallState
from orchestrator.store.budget import charge
from orchestrator.store.db import unit_of_work
from orchestrator.store.events import hold_chain
from orchestrator.store.model_call_rows import ModelCallRow
from orchestrator.store.tables import utcnow

_CALLS: Table = ModelCallRow.__table__  # type: ignore[attr-defined]
MODEL_EVENT: Final = "model"
SEQ_DRAWS: Final = 8  # intents of one saga recorded at the same moment, at most, before giving up


def recorded(engine: Engine, key: str) -> CallRecord | None:
    """The call recorded under `key`, or None."""
    with Session(engine) as s:
        row = s.get(ModelCallRow, key)
        return _record(row) if row is not None else None


def record_intent(engine: Engine, intent: CallIntent) -> CallRecord:
    """Record (and commit) that `intent` is about to be asked. A call recorded before keeps its
    place; one that failed is asked again."""
    for _ in range(SEQ_DRAWS):
        try:
            with unit_of_work(engine) as uow:
                s = uow.session
                row = s.get(ModelCallRow, intent.key)
                if row is None:
                    row = _new_row(s, intent)
                elif row.state == "failed":
                    row.state, row.error = "intent", None
                    s.add(row)
                return _record(row)
        except IntegrityError:
            continue  # another intent of the saga took this seq (or this key) first: draw again
    raise RuntimeError(f"no free seq for a model call of saga {intent.saga_id} after {SEQ_DRAWS} draws")


def record_reply(engine: Engine, intent: CallIntent, answer: CallAnswer) -> CallRecord:
    """Record the reply, charge its tokens and cost to the saga and log its `model` event, in one
    transaction. A call already answered keeps its first reply, which is returned."""
    with unit_of_work(engine) as uow:
        s = uow.session
        hold_chain(s, intent.saga_id)  # the saga's lock first, as every writer of its events
        row = s.get(ModelCallRow, intent.key, populate_existing=True) or _new_row(s, intent)
        if row.state == "answered":
            return _record(row)
        tokens = answer.tokens_in + answer.tokens_out
        spend = Charge(intent.saga_id, limit=0, calls=0, tokens=tokens, cost=answer.cost_usd)
        charge(s, spend, event=_event(intent, answer))
        row.state, row.error = "answered", None
        row.reply, row.call_id = answer.reply, answer.call_id
        row.tokens_in, row.tokens_out, row.cost_usd = answer.tokens_in, answer.tokens_out, answer.cost_usd
        row.latency_ms, row.attempts = answer.latency_ms, row.attempts + answer.attempts
        row.answered_at = utcnow()
        s.add(row)
        return _record(row)


def record_failure(engine: Engine, key: str, error: str, attempts: int) -> None:
    """Record that the call got no usable answer (`error`), after `attempts` more requests. An
    answered call stays answered."""
    with unit_of_work(engine) as uow:
        row = uow.session.get(ModelCallRow, key)
        if row is None or row.state == "answered":
            return
        row.state, row.error, row.attempts = "failed", error[:2000], row.attempts + attempts
        uow.session.add(row)


def usage(engine: Engine, saga_id: str) -> dict[str, Any]:
    """What the saga's answered calls spent: `model_calls`, `tokens_in`, `tokens_out`,
    `cost_usd`, and the same by role name under `by_role`."""
    with Session(engine) as s:
        rows = spent_by_role(s.connection(), saga_id)
    by_role = {
        role: {"model_calls": n, "tokens_in": t_in, "tokens_out": t_out, "cost_usd": c}
        for role, n, t_in, t_out, c in rows
    }
    totals = {
        name: sum(spent[name] for spent in by_role.values())
        for name in ("model_calls", "tokens_in", "tokens_out")
    }
    return {**totals, "cost_usd": float(sum(s["cost_usd"] for s in by_role.values())), "by_role": by_role}


def spent_by_role(conn: Connection, saga_id: str) -> list[tuple[str, int, int, int, float]]:
    """What the saga's answered calls spent, one `(role, calls, tokens_in, tokens_out, cost_usd)`
    per role in name order, read on `conn` (so in its transaction's snapshot)."""
    c = _CALLS.c
    query = (
        sa_select(
            c.role,
            func.count(),
            func.coalesce(func.sum(c.tokens_in), 0),
            func.coalesce(func.sum(c.tokens_out), 0),
            func.coalesce(func.sum(c.cost_usd), 0.0),
        )
        .where(c.saga_id == saga_id, c.state == "answered")
        .group_by(c.role)
        .order_by(c.role)
    )
    return [
        (str(role), int(n), int(t_in), int(t_out), float(cost))
        for role, n, t_in, t_out, cost in conn.execute(query).all()
    ]


def calls_of(engine: Engine, saga_id: str) -> list[dict[str, Any]]:
    """A saga's recorded calls in their order, as JSON-shaped dicts (for status and tests)."""
    with Session(engine) as s:
        rows = s.exec(
            select(ModelCallRow).where(ModelCallRow.saga_id == saga_id).order_by(col(ModelCallRow.seq))
        ).all()
        return [row.model_dump(mode="json") for row in rows]


def _new_row(s: Session, intent: CallIntent) -> ModelCallRow:
    last = s.exec(select(func.max(ModelCallRow.seq)).where(ModelCallRow.saga_id == intent.saga_id)).one()
    row = ModelCallRow(
        key=intent.key,
        saga_id=intent.saga_id,
        role=intent.role,
        round=intent.round,
        seq=(last or 0) + 1,
        request_id=intent.request_id,
        profile=intent.profile,
        model=intent.model,
        params=intent.params,
        request_digest=intent.request_digest,
        state="intent",
    )
    s.add(row)
    return row


def _event(intent: CallIntent, answer: CallAnswer) -> dict[str, Any]:
    """The `model` event's fields (`insert_event`'s)."""
    return {
        "saga_id": intent.saga_id,
        "actor": intent.role,
        "kind": MODEL_EVENT,
        "status": "answered",
        "detail": {
            "key": intent.key,
            "role": intent.role,
            "round": intent.round,
            "profile": intent.profile,
            "model": intent.model,
            "response_model": answer.reply.get("model"),
            "params": intent.params,
            "request_digest": intent.request_digest,
            "tokens_in": answer.tokens_in,
            "tokens_out": answer.tokens_out,
            "cost_usd": answer.cost_usd,
            "latency_ms": answer.latency_ms,
            "call_id": answer.call_id,
        },
    }


def _record(row: ModelCallRow) -> CallRecord:
    state: CallState = row.state  # type: ignore[assignment]  # only this module writes it
    return CallRecord(
        key=row.key,
        state=state,
        reply=row.reply,
        attempts=row.attempts,
        error=row.error,
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        cost_usd=row.cost_usd,
    )


class StoredModelCalls:
    """`ModelCallLog` over an engine: the functions above, each its own transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def recorded(self, key: str) -> CallRecord | None:
        return recorded(self.engine, key)

    def record_intent(self, intent: CallIntent) -> CallRecord:
        return record_intent(self.engine, intent)

    def record_reply(self, intent: CallIntent, answer: CallAnswer) -> CallRecord:
        return record_reply(self.engine, intent, answer)

    def record_failure(self, key: str, error: str, attempts: int) -> None:
        record_failure(self.engine, key, error, attempts)

    def usage(self, saga_id: str) -> dict[str, Any]:
        return usage(self.engine, saga_id)


__all__ = [
    "MODEL_EVENT",
    "ModelCallRow",
    "StoredModelCalls",
    "calls_of",
    "record_failure",
    "record_intent",
    "record_reply",
    "recorded",
    "spent_by_role",
    "usage",
]

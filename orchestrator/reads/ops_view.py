"""What the operators' `/ops` page shows from the database: work waiting per
queue, the outbox's unsent rows, and the sagas stuck longest in each live state.

Every query is bounded and rides an index:

- open work per queue and task: the `work` rows not done of sagas in a live
  state (`sagas.state` index, then `work.saga_id` index), counted, with the
  oldest row's age and the earliest lease deadline (work of a saga that has
  ended is not waited on by anyone and is left out);
- the outbox: rows with no `sent_at` (`ix_outbox_unsent`), counted per queue,
  with the oldest one's age;
- stuck sagas: per live state, the `STUCK_PER_STATE` sagas unchanged the
  longest (`sagas.state` index, LIMIT), each with what it waits on: its
  oldest open work row (`work.saga_id`), or its destination steps that are
  pending, executing or uncertain (`steps.saga_id`), or a reviewer.

`waiting_on` and `age_text` are pure; `read_ops` does the reading.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.engine import Connection, Engine

from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import SagaRow, StepRow, WorkRow

LIVE_STATES = ("preparing", "ready-for-review", "approved", "executing", "effect-unknown")
STUCK_PER_STATE = 5
# Destination steps a saga may be waiting on (a step `done`, `failed` or `compensated` is settled).
OPEN_STEPS = ("pending", "executing", "uncertain")

_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_WORK: Table = WorkRow.__table__  # type: ignore[attr-defined]
_STEPS: Table = StepRow.__table__  # type: ignore[attr-defined]
_OUTBOX: Table = OutboxRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class OpenWork:
    """Work not done for one queue and task."""

    queue: str
    task: str
    count: int
    oldest_at: datetime
    earliest_lease: datetime


@dataclass(frozen=True)
class Unsent:
    """Outbox rows the relay has not handed to the broker yet, for one queue."""

    queue: str
    count: int
    oldest_at: datetime


@dataclass(frozen=True)
class Stuck:
    """A saga in a live state, unchanged since `since`, and what it waits on."""

    saga_id: str
    state: str
    since: datetime
    waits_on: str
    lease_until: datetime | None = None


@dataclass(frozen=True)
class OpsView:
    now: datetime
    open_work: tuple[OpenWork, ...]
    unsent: tuple[Unsent, ...]
    stuck: dict[str, tuple[Stuck, ...]]  # live state -> its sagas, longest unchanged first


def aware(moment: datetime) -> datetime:
    """A database datetime as aware UTC (SQLite may give it back naive)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def age_text(seconds: float) -> str:
    """A short age: `42s`, `7m 05s`, `3h 12m`, `2d 4h`."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def waiting_on(state: str, oldest_work_task: str | None, open_steps: Sequence[tuple[str, str]]) -> str:
    """What a saga in `state` waits on: its oldest open work row's task, else its open
    destination steps (`(uri, step state)`), else what the state itself waits for."""
    if oldest_work_task is not None:
        return f"work {oldest_work_task}"
    if open_steps:
        return "; ".join(f"{uri} ({step})" for uri, step in open_steps)
    if state == "ready-for-review":
        return "a reviewer's decision"
    if state == "effect-unknown":
        return "a person's reconcile"
    return "no open work or step (recovery sends it again when its lease runs out)"


def _open_work(conn: Connection) -> tuple[OpenWork, ...]:
    live = select(_SAGAS.c.id).where(_SAGAS.c.state.in_(LIVE_STATES))
    query = (
        select(
            _WORK.c.queue,
            _WORK.c.task,
            func.count().label("n"),
            func.min(_WORK.c.created_at).label("oldest"),
            func.min(_WORK.c.lease_until).label("lease"),
        )
        .where(_WORK.c.saga_id.in_(live), _WORK.c.done_at.is_(None))
        .group_by(_WORK.c.queue, _WORK.c.task)
        .order_by(_WORK.c.queue, _WORK.c.task)
    )
    return tuple(
        OpenWork(r.queue, r.task, int(r.n), aware(r.oldest), aware(r.lease)) for r in conn.execute(query)
    )


def _unsent(conn: Connection) -> tuple[Unsent, ...]:
    query = (
        select(_OUTBOX.c.queue, func.count().label("n"), func.min(_OUTBOX.c.created_at).label("oldest"))
        .where(_OUTBOX.c.sent_at.is_(None))
        .group_by(_OUTBOX.c.queue)
        .order_by(_OUTBOX.c.queue)
    )
    return tuple(Unsent(r.queue, int(r.n), aware(r.oldest)) for r in conn.execute(query))


def _stuck_rows(conn: Connection, per_state: int) -> list[Any]:
    rows: list[Any] = []
    for state in LIVE_STATES:
        query = (
            select(_SAGAS.c.id, _SAGAS.c.state, _SAGAS.c.updated_at)
            .where(_SAGAS.c.state == state)
            .order_by(_SAGAS.c.updated_at, _SAGAS.c.id)
            .limit(per_state)
        )
        rows.extend(conn.execute(query))
    return rows


def _oldest_work(conn: Connection, saga_ids: Iterable[str]) -> dict[str, tuple[str, datetime]]:
    query = (
        select(_WORK.c.saga_id, _WORK.c.task, _WORK.c.lease_until)
        .where(_WORK.c.saga_id.in_(list(saga_ids)), _WORK.c.done_at.is_(None))
        .order_by(_WORK.c.created_at.desc())
    )
    oldest: dict[str, tuple[str, datetime]] = {}
    for r in conn.execute(query):  # newest first: the last one kept per saga is its oldest
        oldest[r.saga_id] = (r.task, aware(r.lease_until))
    return oldest


def _open_steps(conn: Connection, saga_ids: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    query = (
        select(_STEPS.c.saga_id, _STEPS.c.uri, _STEPS.c.state)
        .where(_STEPS.c.saga_id.in_(list(saga_ids)), _STEPS.c.state.in_(OPEN_STEPS))
        .order_by(_STEPS.c.saga_id, _STEPS.c.position)
    )
    steps: dict[str, list[tuple[str, str]]] = {}
    for r in conn.execute(query):
        steps.setdefault(r.saga_id, []).append((r.uri, r.state))
    return steps


def read_ops(engine: Engine, now: datetime, *, per_state: int = STUCK_PER_STATE) -> OpsView:
    """Everything the page shows from the database, read in one transaction."""
    with engine.connect() as conn:
        open_work = _open_work(conn)
        unsent = _unsent(conn)
        rows = _stuck_rows(conn, per_state)
        ids = [r.id for r in rows]
        work = _oldest_work(conn, ids) if ids else {}
        steps = _open_steps(conn, ids) if ids else {}
    stuck: dict[str, tuple[Stuck, ...]] = {}
    for state in LIVE_STATES:
        stuck[state] = tuple(
            Stuck(
                saga_id=r.id,
                state=r.state,
                since=aware(r.updated_at),
                waits_on=waiting_on(r.state, work[r.id][0] if r.id in work else None, steps.get(r.id, [])),
                lease_until=work[r.id][1] if r.id in work else None,
            )
            for r in rows
            if r.state == state
        )
    return OpsView(now=now, open_work=open_work, unsent=unsent, stuck=stuck)


__all__ = [
    "LIVE_STATES",
    "OPEN_STEPS",
    "STUCK_PER_STATE",
    "OpenWork",
    "OpsView",
    "Stuck",
    "Unsent",
    "age_text",
    "aware",
    "read_ops",
    "waiting_on",
]

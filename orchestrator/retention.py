"""Retention: remove the bookkeeping of finished sagas once it is old.

`prune(engine, older_than=…, reconcile_window=…, now=…)` looks at sagas in a
final state (`succeeded`, `failed`, `cancelled`) whose last change is older
than `now - older_than`, and removes, per saga:

| table         | which rows                                                        |
|---------------|-------------------------------------------------------------------|
| `events`      | all of the saga's events                                          |
| `checkpoints` | all of the saga's checkpoints                                     |
| `ledger`      | the saga's rows last changed before `now - max(older_than, reconcile_window)` |
| `inbox`       | rows of messages the saga's sent outbox rows carried              |
| `outbox`      | the saga's rows that were sent (an unsent row is left to the relay) |
| `work`        | the saga's finished work rows                                     |
| `capability_uses` | the saga's handle uses older than the ledger's cut-off (they answer a replayed call, as the ledger does) |

The saga row, its versions, artifacts, approvals and steps stay: `status`,
`show` and receipts keep working. A saga whose events went gets one event
back, written by the caller's `snapshot` in the same transaction: a prune
snapshot stating what the removed events gave (state, head version, steps),
so `pressroom audit verify` still checks the saga against its log. A
snapshot is not removed again unless newer events are. A saga that is not final is never touched,
and neither is a ledger row younger than the reconcile window
(`PRESSROOM_RECONCILE_WINDOW`, default 7 days): the time within which a
replayed call or a person reconciling may still need the recorded receipt.

The ledger's rows go through the `Ledger` port (`Ledger.prune`, the store's
SQL), in the batch's transaction; nothing here writes `LedgerRow`.

Sagas are taken in batches, oldest change first, each batch one short
transaction that locks its saga rows (PostgreSQL: `FOR UPDATE SKIP LOCKED`,
so a saga being changed right now is left for the next run) and re-reads
their state, so work on other sagas goes on while a prune runs. The batches
walk the window by a keyset cursor on `(updated_at, id)` over the finished
sagas' own index (`ix_sagas_finished`, migration 0015): a batch reads the
sagas it takes, never the history before or after the window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Table, delete, func, select, text, tuple_
from sqlalchemy.engine import Engine
from sqlalchemy.sql import ColumnElement
from sqlmodel import Session

from orchestrator.harness.ports import Ledger
from orchestrator.store.adapter import adapter_for
from orchestrator.store.db import unit_of_work
from orchestrator.store.handle_uses import HandleUseRow
from orchestrator.store.harness_store import SqlHarnessStore
from orchestrator.store.outbox_tables import InboxRow, OutboxRow
from orchestrator.store.tables import FINISHED_STATES_SQL, CheckpointRow, EventRow, SagaRow, WorkRow
from telemetry import metrics

TABLES = ("events", "checkpoints", "ledger", "inbox", "outbox", "work", "capability_uses")
_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_EVENTS: Table = EventRow.__table__  # type: ignore[attr-defined]
_CHECKPOINTS: Table = CheckpointRow.__table__  # type: ignore[attr-defined]
_INBOX: Table = InboxRow.__table__  # type: ignore[attr-defined]
_OUTBOX: Table = OutboxRow.__table__  # type: ignore[attr-defined]
_WORK: Table = WorkRow.__table__  # type: ignore[attr-defined]
_USES: Table = HandleUseRow.__table__  # type: ignore[attr-defined]


@dataclass
class PruneReport:
    cutoff: datetime
    ledger_cutoff: datetime
    dry_run: bool
    sagas: int = 0
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    seconds: float = 0.0
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        from orchestrator.reads.views import iso

        return {
            "cutoff": iso(self.cutoff),
            "ledger_cutoff": iso(self.ledger_cutoff),
            "dry_run": self.dry_run,
            "sagas": self.sagas,
            "rows": dict(self.rows),
            "total": sum(self.rows.values()),
            "seconds": round(self.seconds, 3),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
        }


_SNAPSHOT = (_EVENTS.c.kind == "saga") & (_EVENTS.c.status == "pruned")

Snapshot = Callable[[Session, Sequence[str]], None]
"""Writes a prune snapshot event for each saga id, in the prune's transaction."""


def _targets(ids: Sequence[str], uses_before: datetime) -> list[tuple[str, Table, ColumnElement[bool]]]:
    sent = select(_OUTBOX.c.id).where(_OUTBOX.c.saga_id.in_(ids), _OUTBOX.c.sent_at.is_not(None))
    return [
        # The inbox goes before the outbox rows it is matched through.
        ("inbox", _INBOX, _INBOX.c.message_id.in_(sent)),
        ("outbox", _OUTBOX, _OUTBOX.c.saga_id.in_(ids) & _OUTBOX.c.sent_at.is_not(None)),
        ("events", _EVENTS, _EVENTS.c.saga_id.in_(ids) & ~_SNAPSHOT),
        ("checkpoints", _CHECKPOINTS, _CHECKPOINTS.c.saga_id.in_(ids)),
        ("work", _WORK, _WORK.c.saga_id.in_(ids) & _WORK.c.done_at.is_not(None)),
        ("capability_uses", _USES, _USES.c.saga_id.in_(ids) & (_USES.c.used_at < uses_before)),
    ]


def prune(
    engine: Engine,
    *,
    older_than: timedelta,
    reconcile_window: timedelta,
    now: datetime,
    dry_run: bool = False,
    batch: int = 500,
    snapshot: Snapshot | None = None,
    ledger: Ledger | None = None,
) -> PruneReport:
    """Prune as the module says; `ledger` removes the ledger's rows (the store's, by default)."""
    ledger = ledger if ledger is not None else SqlHarnessStore(engine)
    report = PruneReport(
        cutoff=now - older_than,
        ledger_cutoff=now - max(older_than, reconcile_window),
        dry_run=dry_run,
    )
    started = time.perf_counter()
    report.started_at = datetime.now(UTC)
    moment, last = _SAGAS.c.updated_at, _SAGAS.c.id
    after: tuple[datetime, str] | None = None
    while True:
        with unit_of_work(engine) as uow:
            conn = uow.session.connection()
            # The states as a literal, the very predicate of `ix_sagas_finished`, so the
            # planner may use that partial index whatever plan it caches.
            query = (
                select(_SAGAS.c.id, moment)
                .where(text(FINISHED_STATES_SQL), moment < report.cutoff)
                .order_by(moment, last)
                .limit(batch)
            )
            if after is not None:
                query = query.where(tuple_(moment, last) > tuple_(*after))
            if adapter_for(engine).skips_locked and not dry_run:
                query = query.with_for_update(skip_locked=True)
            taken = conn.execute(query).all()
            if not taken:
                break
            after = (taken[-1][1], taken[-1][0])
            ids = [row[0] for row in taken]
            report.sagas += len(ids)
            with_history = [
                row[0]
                for row in conn.execute(
                    select(_EVENTS.c.saga_id).where(_EVENTS.c.saga_id.in_(ids), ~_SNAPSHOT).distinct()
                )
            ]
            for name, table, where in _targets(ids, report.ledger_cutoff):
                if dry_run:
                    count = conn.execute(select(func.count()).select_from(table).where(where)).scalar_one()
                else:
                    count = conn.execute(delete(table).where(where)).rowcount
                report.rows[name] += int(count or 0)
            # The ledger's rows go through its port, in the same transaction.
            report.rows["ledger"] += ledger.prune(ids, report.ledger_cutoff, within=uow, count_only=dry_run)
            if with_history and not dry_run and snapshot is not None:
                # The old snapshot goes with the events after it; the new one states them all.
                conn.execute(delete(_EVENTS).where(_EVENTS.c.saga_id.in_(with_history), _SNAPSHOT))
                snapshot(uow.session, with_history)
    report.seconds = time.perf_counter() - started
    report.finished_at = datetime.now(UTC)
    if not dry_run:
        for name, count in report.rows.items():
            metrics.record_pruned(name, count)
    return report


class RetentionSchedule:
    """When the relay should prune next: at its first sweep, then every `every` seconds."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._next: float | None = None

    def due(self) -> bool:
        now = self.clock()
        if self._next is not None and now < self._next:
            return False
        self._next = now + self.every
        return True


__all__ = ["TABLES", "PruneReport", "RetentionSchedule", "prune"]

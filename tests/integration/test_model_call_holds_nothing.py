"""A model call in flight holds no transaction, no pooled connection and no lock on its work row.

In-process on PostgreSQL, with the scripted model server answering slowly: a pipeline
whose writer is on the model. Its draft message is delivered by hand on a thread of
the test while the test reads `pg_stat_activity`, `pg_locks` and the engine's pool. The
same holds for a writer's message that does not say it calls a model (`uses_model`
false: queued by an older release, or by a dispatcher that forgot): the turn asks for
its lease first as soon as it is about to call the model; and for a delivery run as a
worker runs it, on a waiting loop (`outbox.waits`). A lease shorter than the call
is kept alive while the turn waits, so the sweeper resends nothing and the delivery
applies its result.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlmodel import Session, col, select

from evaluation.scripted_model import ScriptedModel
from orchestrator.bootstrap import sweep_leases
from orchestrator.core.routing import DRAFT, RESEARCH
from orchestrator.pressroom import Pressroom
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import WorkRow
from outbox.messages import Envelope
from outbox.waits import Waits
from tests.integration.helpers import make_app
from tests.support.model_pipelines import KEY, KEY_VARIABLE, Role, write_pipelines

BRIEF = "history of the library network"
WRITER_ON_MODEL = (
    Role("research", "researcher", model=False),
    Role("draft", "writer", ("research",)),
    Role("check", "reviewer", ("draft",), model=False),
)
IDLE_IN_TRANSACTION = """
    SELECT count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND state LIKE 'idle in transaction%'
"""
WORK_LOCKS = """
    SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE c.relname = 'work' AND l.pid <> pg_backend_pid()
"""


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel("faithful", latency=1.5) as served:
        yield served


def _app(pg_url: str, tmp_path: Path, model: ScriptedModel, **settings: Any) -> Pressroom:
    folder = write_pipelines(tmp_path / "pipelines", model.url, {"drafted": WRITER_ON_MODEL})
    # No broker: every message is delivered by the test, on the thread it chooses.
    return make_app(pg_url, tmp_path, broker_url="none://", pipelines_dir=folder, **settings)


def _queued(app: Pressroom, task: str) -> OutboxRow:
    with Session(app.engine) as s:
        return s.exec(
            select(OutboxRow).where(OutboxRow.task == task).order_by(col(OutboxRow.created_at))
        ).all()[-1]


def _deliver(app: Pressroom, row: OutboxRow, payload: dict[str, Any] | None = None) -> str:
    env = Envelope(message_id=row.id, task=row.task, queue=row.queue, payload=payload or row.payload)
    return app.consumer.handle(env)


def _at_the_draft(app: Pressroom, corpus: Path) -> tuple[str, OutboxRow]:
    """A saga whose research is done and whose draft message is queued."""
    sid = str(
        app.submissions.submit(
            brief=BRIEF, corpus=str(corpus), destinations=["memory:m"], actor="sam", pipeline="drafted"
        )["saga_id"]
    )
    assert _deliver(app, _queued(app, RESEARCH)) == "applied"
    return sid, _queued(app, DRAFT)


class Delivery(threading.Thread):
    """One delivery on a thread of its own; `outcome` once it ends."""

    def __init__(self, app: Pressroom, row: OutboxRow, payload: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.app, self.row, self.payload = app, row, payload
        self.outcome: str | BaseException | None = None

    def run(self) -> None:
        try:
            self.outcome = _deliver(self.app, self.row, self.payload)
        except BaseException as exc:
            self.outcome = exc


def _wait_for_the_call(model: ScriptedModel, delivery: Delivery, waits: Waits | None) -> None:
    deadline = time.monotonic() + 20
    while model.stats().in_flight == 0:
        alive = delivery.is_alive() or (waits is not None and waits.running() > 0)
        assert alive, f"the delivery ended before it asked the model: {delivery.outcome!r}"
        assert time.monotonic() < deadline, "the writer never asked the model"
        time.sleep(0.01)


def _done(
    app: Pressroom, delivery: Delivery, waits: Waits | None
) -> tuple[str | BaseException | None, WorkRow]:
    """How the delivery ended, and its work row (a waiting delivery ends on its loop: `waiting`)."""
    delivery.join(30)
    deadline = time.monotonic() + 30
    while waits is not None and waits.running():
        assert time.monotonic() < deadline, "the waiting delivery never ended"
        time.sleep(0.02)
    with Session(app.engine) as s:
        return delivery.outcome, s.get_one(WorkRow, delivery.payload["work_id"])


@pytest.mark.parametrize(
    ("uses_model", "waiting"),
    [(True, False), (False, False), (True, True)],
    ids=["as-dispatched", "flag-missing", "on-a-waiting-loop"],
)
def test_a_model_call_in_flight_holds_no_transaction_connection_or_lock(
    pg_url: str, tmp_path: Path, corpus: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch,
    uses_model: bool, waiting: bool,
) -> None:  # fmt: skip
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    app = _app(pg_url, tmp_path, model)
    waits = Waits(threads=1, capacity=4) if waiting else None
    app.consumer.waits = waits  # as a worker runs it (`pressroom worker`)
    try:
        _sid, draft = _at_the_draft(app, corpus)
        assert draft.payload["uses_model"] is True
        delivery = Delivery(app, draft, {**draft.payload, "uses_model": uses_model})
        delivery.start()
        _wait_for_the_call(model, delivery, waits)
        seen: list[tuple[int, int, int]] = []
        plain = pg_url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(plain, autocommit=True) as watcher:
            while model.stats().in_flight:
                idle = watcher.execute(IDLE_IN_TRANSACTION).fetchone()
                locks = watcher.execute(WORK_LOCKS).fetchone()
                assert idle is not None and locks is not None
                seen.append((idle[0], locks[0], app.engine.pool.checkedout()))  # type: ignore[attr-defined]
                time.sleep(0.05)
        outcome, work = _done(app, delivery, waits)
        assert outcome == ("waiting" if waiting else "applied"), outcome
        assert work.done_at is not None and work.holder == draft.id
        assert len(seen) >= 5, "too few looks while the model answered"
        # (transactions idle in transaction, locks on `work`, connections checked out of the pool)
        assert set(seen) == {(0, 0, 0)}, seen
        assert model.stats().requests == 1
        assert work.attempts == 1, "a claim rolled back before the model was asked counts no attempt"
    finally:
        app.close()


def test_a_lease_shorter_than_the_model_call_is_kept_alive_while_it_waits(
    pg_url: str, tmp_path: Path, corpus: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    app = _app(pg_url, tmp_path, model, lease_seconds=0.6)
    try:
        _sid, draft = _at_the_draft(app, corpus)
        delivery = Delivery(app, draft, draft.payload)
        delivery.start()
        _wait_for_the_call(model, delivery, None)
        time.sleep(1.0)  # the lease taken before the call has run out by now
        assert model.stats().in_flight == 1
        assert sweep_leases(app) == 0, "the sweeper sent the work of a turn still waiting on its model"
        with Session(app.engine) as s:
            work = s.get_one(WorkRow, draft.payload["work_id"])
        assert work.holder == draft.id and work.done_at is None
        delivery.join(30)
        assert delivery.outcome == "applied", delivery.outcome
        stats = model.stats()
        assert stats.requests == 1 and list(stats.by_idempotency_key.values()) == [1], stats
    finally:
        app.close()

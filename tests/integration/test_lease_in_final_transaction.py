"""Short work takes its lease inside its final transaction (PostgreSQL): a
duplicate copy finds the lease held while the first copy works, a handler that
ends without its result leaves the lease as the lease-first path does, the
publisher keeps its lease in a transaction of its own, a delivery whose claim
was never committed is sent again, and the relay marks a whole batch sent."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlmodel import Session, col, select

from orchestrator.bootstrap import sweep_leases
from orchestrator.core.errors import RetryLater
from orchestrator.core.routing import RESEARCH
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import WorkRow, new_id, utcnow
from outbox.handlers import Finalizer, noop
from outbox.messages import Envelope, Handoff
from outbox.writer import envelope_of
from tests.integration.helpers import make_app


def _submitted(app: Pressroom, corpus: Path) -> tuple[str, Envelope]:
    sid = app.submissions.submit(
        brief="library network", corpus=str(corpus), destinations=["memory:l"], actor="dana"
    )["saga_id"]
    with Session(app.engine) as s:
        row = s.exec(select(OutboxRow).where(OutboxRow.saga_id == sid)).one()
        return sid, envelope_of(row)


def _copy(env: Envelope) -> Envelope:
    return Envelope(
        message_id=new_id(), task=env.task, queue=env.queue, payload=env.payload, headers=env.headers
    )


def _work(app: Pressroom) -> WorkRow:
    with Session(app.engine) as s:
        return s.exec(select(WorkRow)).one()


def test_a_duplicate_finds_the_lease_held_while_the_first_copy_works(
    pg_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(pg_url, tmp_path, broker_url="none://")
    assert app.consumer.folds_lease("writer") and app.consumer.folds_lease("reviewer")
    assert not app.consumer.folds_lease("researcher") and not app.consumer.folds_lease("publisher")
    app.consumer.short_queues = frozenset({"researcher"})  # fold the first handoff of the saga here
    _, env = _submitted(app, corpus)
    entered, release = threading.Event(), threading.Event()

    def slow(handoff: Handoff, holder: str) -> Finalizer:
        entered.set()
        assert release.wait(60), "never released"
        return noop

    app.handlers[RESEARCH] = slow
    outcomes: dict[str, str] = {}
    first = threading.Thread(target=lambda: outcomes.update(first=app.consumer.handle(env)))
    first.start()
    assert entered.wait(60)
    second = threading.Thread(target=lambda: outcomes.update(second=app.consumer.handle(_copy(env))))
    second.start()
    second.join(60)  # a copy that waited on the first one's row lock would still be running here
    assert outcomes.get("second") == "lease-held", outcomes
    release.set()
    first.join(60)
    assert outcomes["first"] == "applied", outcomes
    work = _work(app)
    assert work.done_at is not None and work.holder == env.message_id and work.attempts == 1
    assert app.consumer.handle(_copy(env)) == "lease-held", "done work takes no lease"
    assert app.consumer.handle(env) == "duplicate", "the same message again is applied once"


@pytest.mark.parametrize("ending", ["deferred", "crashed"])
def test_a_handler_that_ends_without_its_result_leaves_the_lease_taken(
    ending: str, pg_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(pg_url, tmp_path, broker_url="none://")
    app.consumer.short_queues = frozenset({"researcher"})
    _, env = _submitted(app, corpus)

    def failing(handoff: Handoff, holder: str) -> Finalizer:
        if ending == "deferred":
            raise RetryLater("the destination is busy")
        raise RuntimeError("handler bug")

    app.handlers[RESEARCH] = failing
    if ending == "deferred":
        assert app.consumer.handle(env) == "deferred"
    else:
        with pytest.raises(RuntimeError):
            app.consumer.handle(env)
    work = _work(app)
    assert work.holder == env.message_id and work.attempts == 1 and work.done_at is None
    assert work.lease_until > utcnow() + timedelta(seconds=30), "the lease runs from the claim"
    assert app.consumer.handle(_copy(env)) == "lease-held"


def test_a_delivery_whose_claim_was_never_committed_is_resent_without_using_an_attempt(
    pg_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(pg_url, tmp_path, broker_url="none://", max_attempts=2)
    sid, _ = _submitted(app, corpus)
    # One delivery claimed and lost (attempts 1), then one that left no claim behind: its
    # consumer died inside the transaction that claimed it, or the broker lost it, or it
    # waited in a backlog longer than the lease. The work is sent again; the saga goes on.
    with unit_of_work(app.engine) as uow:
        uow.session.execute(
            update(WorkRow).values(lease_until=utcnow() - timedelta(seconds=1), attempts=1, holder=None)
        )
    assert sweep_leases(app) == 1
    status: dict[str, Any] = app.reads.status(sid)
    assert status["state"] == "preparing", status
    work = _work(app)
    assert work.attempts == 1 and work.holder is None and work.done_at is None
    with Session(app.engine) as s:
        assert len(s.exec(select(OutboxRow).where(OutboxRow.saga_id == sid)).all()) == 2


def test_the_relay_marks_a_whole_batch_sent(pg_url: str, tmp_path: Path, corpus: Path) -> None:
    quiet = make_app(pg_url, tmp_path, broker_url="none://")
    for _ in range(3):
        _submitted(quiet, corpus)
    app = make_app(pg_url, tmp_path, broker_url="inline://", relay_grace=0)
    app.consumer.auto_drain = False
    assert app.relay.run_once() == 3
    with Session(app.engine) as s:
        rows = s.exec(select(OutboxRow).order_by(col(OutboxRow.created_at))).all()
    assert [r.send_attempts for r in rows] == [1, 1, 1] and all(r.sent_at is not None for r in rows)
    assert app.relay.run_once() == 0

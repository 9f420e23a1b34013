"""Work leases: a held lease keeps duplicates out, an expired one is re-sent
through the outbox, and work that keeps losing its lease fails the saga."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import update
from sqlmodel import Session, col, select

from orchestrator.bootstrap import sweep_leases
from orchestrator.core.clock import ManualClock
from orchestrator.store.db import unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.row_values import aware
from orchestrator.store.tables import WorkRow, utcnow
from orchestrator.store.work import take_lease
from tests.integration.helpers import make_app


def _expire(app, attempts: int) -> None:  # type: ignore[no-untyped-def]
    with unit_of_work(app.engine) as uow:
        uow.session.execute(
            update(WorkRow).values(
                lease_until=utcnow() - timedelta(seconds=1), attempts=attempts, holder="dead-worker"
            )
        )


def test_a_held_lease_refuses_a_duplicate_and_an_expired_one_is_resent(
    sqlite_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(sqlite_url, tmp_path, broker_url="none://", max_attempts=3)
    sid = app.submissions.submit(
        brief="library network", corpus=str(corpus), destinations=["memory:l"], actor="dana"
    )["saga_id"]
    with Session(app.engine) as s:
        work = s.exec(select(WorkRow)).one()
    assert take_lease(app.engine, work.id, "copy-1", 60) is not None
    assert take_lease(app.engine, work.id, "copy-2", 60) is None, "a duplicate cannot take a held lease"
    assert sweep_leases(app) == 0
    _expire(app, attempts=1)
    assert sweep_leases(app) == 1
    with Session(app.engine) as s:
        rows = s.exec(
            select(OutboxRow).where(OutboxRow.saga_id == sid).order_by(col(OutboxRow.created_at))
        ).all()
        assert len(rows) == 2 and rows[0].payload == rows[1].payload, "the same work, sent again"
        assert s.exec(select(WorkRow)).one().holder is None
    assert app.reads.status(sid)["state"] == "preparing"


def test_work_that_keeps_losing_its_lease_fails_the_saga_with_the_reason(
    sqlite_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(sqlite_url, tmp_path, broker_url="none://", max_attempts=2)
    sid = app.submissions.submit(
        brief="library network", corpus=str(corpus), destinations=["memory:l"], actor="dana"
    )["saga_id"]
    _expire(app, attempts=2)
    assert sweep_leases(app) == 1
    status = app.reads.status(sid)
    assert status["state"] == "failed"
    assert "lost its lease 2 times" in status["reason"]


def test_a_publish_that_keeps_losing_its_lease_is_effect_unknown_through_the_ledger_port(
    sqlite_url: str, tmp_path: Path, corpus: Path
) -> None:
    """The publisher died after committing its intent, every time: the sweeper's give-up marks the
    ledger row uncertain through the store port and the step uncertain with its event; a person's
    reconcile (the port again) lets the saga finish without publishing twice."""
    import uuid

    from orchestrator.harness.checkpoints import AgentState
    from orchestrator.harness.digests import args_digest
    from orchestrator.harness.ledger_status import LedgerStatus
    from orchestrator.harness.ports import EventTimes
    from sagas import records
    from sagas.destinations.memory import memory_store
    from sagas.execution_steps import start_execution
    from sagas.publishing import PublishArgs
    from tests.integration.helpers import ready_saga

    people = make_app(sqlite_url, tmp_path)
    sid = ready_saga(people, corpus, ["memory:leases-give-up"])["saga_id"]
    quiet = make_app(
        sqlite_url, tmp_path, broker_url="none://", max_attempts=2
    )  # nothing delivers the publish
    approved = quiet.reviews.approve(sid, version=1, actor="erin")
    with unit_of_work(quiet.engine) as uow:
        saga = records.load_saga(uow.session, sid, lock=True)
        (step,) = start_execution(uow.session, saga, approved["version_digest"])
        key = step.idempotency_key
    assert key is not None
    args = PublishArgs(
        saga_id=sid, destination="memory:leases-give-up", version_digest=approved["version_digest"]
    )
    digest = args_digest(args.model_dump(mode="json"))
    intent = AgentState(
        event_id=uuid.uuid4().hex, step=1, tool="publish", idempotency_key=key, args_digest=digest
    )
    quiet.store.begin_effect(
        saga_id=sid, actor="publisher", state=intent, approval_id=None, execution=None, times=EventTimes()
    )
    _expire(quiet, attempts=2)
    assert sweep_leases(quiet) == 1
    status = quiet.reads.status(sid)
    assert status["state"] == "effect-unknown" and "lost its lease 2 times" in status["reason"]
    assert [d["state"] for d in status["destinations"]] == ["uncertain"]
    ledger = quiet.store.ledger_get(key)
    assert ledger is not None and ledger.status == LedgerStatus.UNCERTAIN
    history = quiet.reads.history(sid)["events"]
    assert [(e["actor"], e["status"]) for e in history if e["kind"] == "step"][-1] == ("sweeper", "uncertain")

    done = people.reviews.reconcile(
        sid,
        destination="memory:leases-give-up",
        outcome="confirmed",
        actor="erin",
        reason="seen live",
    )
    assert done["state"] == "succeeded"
    ledger = people.store.ledger_get(key)
    assert ledger is not None and ledger.status == LedgerStatus.DONE and ledger.result is not None
    assert ledger.result["reconciled_by"] == "erin"
    publishes = [
        e["status"]
        for e in people.reads.history(sid)["events"]
        if e["tool"] == "publish" and e["kind"] == "tool_call"
    ]
    assert set(publishes) <= {"replayed"}, "the destination is never called again"
    assert memory_store("leases-give-up").calls.get("publish", 0) == 0


def test_work_is_leased_and_settled_by_the_apps_clock(sqlite_url: str, tmp_path: Path, corpus: Path) -> None:
    """The dispatcher dates a lease, and the consumer takes and settles it, by the one clock the
    composition root is given, not the wall clock."""
    ahead = ManualClock(utcnow() + timedelta(days=3))
    app = make_app(sqlite_url, tmp_path, clock=ahead, lease_seconds=60)  # inline://: delivered at once
    sid = app.submissions.submit(
        brief="library network", corpus=str(corpus), destinations=["memory:c"], actor="dana"
    )["saga_id"]
    assert app.reads.status(sid)["state"] == "ready-for-review"
    with Session(app.engine) as s:
        works = s.exec(select(WorkRow).where(WorkRow.saga_id == sid)).all()
    assert works
    for work in works:
        assert work.done_at is not None and abs(aware(work.done_at) - ahead.now()) < timedelta(seconds=5)
        assert abs(aware(work.lease_until) - (ahead.now() + timedelta(seconds=60))) < timedelta(seconds=5)
    held = make_app(sqlite_url, tmp_path, broker_url="none://", clock=ahead, lease_seconds=60)
    queued = held.submissions.submit(
        brief="library network", corpus=str(corpus), destinations=["memory:d"], actor="dana"
    )["saga_id"]
    with Session(held.engine) as s:
        waiting = s.exec(select(WorkRow).where(WorkRow.saga_id == queued)).one()
    assert waiting.done_at is None  # no broker took it: its lease is the dispatcher's own
    assert abs(aware(waiting.lease_until) - (ahead.now() + timedelta(seconds=60))) < timedelta(seconds=5)

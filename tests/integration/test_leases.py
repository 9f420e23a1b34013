"""Work leases: a held lease keeps duplicates out, an expired one is re-sent
through the outbox, and work that keeps losing its lease fails the saga."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import update
from sqlmodel import Session, col, select

from orchestrator import services
from orchestrator.bootstrap import sweep_leases
from orchestrator.store.db import unit_of_work
from orchestrator.store.tables import WorkRow, utcnow
from orchestrator.store.work import take_lease
from outbox.tables import OutboxRow
from tests.integration.helpers import make_app


def _expire(app, attempts: int) -> None:  # type: ignore[no-untyped-def]
    with unit_of_work(app.engine) as uow:
        uow.session.execute(
            update(WorkRow).values(lease_until=utcnow() - timedelta(seconds=1), attempts=attempts, holder="dead-worker")
        )


def test_a_held_lease_refuses_a_duplicate_and_an_expired_one_is_resent(sqlite_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(sqlite_url, tmp_path, broker_url="none://", max_attempts=3)
    sid = services.submit(app, brief="library network", corpus=str(corpus), destinations=["memory:l"], actor="dana")[
        "saga_id"
    ]
    with Session(app.engine) as s:
        work = s.exec(select(WorkRow)).one()
    assert take_lease(app.engine, work.id, "copy-1", 60) is not None
    assert take_lease(app.engine, work.id, "copy-2", 60) is None, "a duplicate cannot take a held lease"
    assert sweep_leases(app) == 0
    _expire(app, attempts=1)
    assert sweep_leases(app) == 1
    with Session(app.engine) as s:
        rows = s.exec(select(OutboxRow).where(OutboxRow.saga_id == sid).order_by(col(OutboxRow.created_at))).all()
        assert len(rows) == 2 and rows[0].payload == rows[1].payload, "the same work, sent again"
        assert s.exec(select(WorkRow)).one().holder is None
    assert services.status(app, sid)["state"] == "preparing"


def test_work_that_keeps_losing_its_lease_fails_the_saga_with_the_reason(sqlite_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(sqlite_url, tmp_path, broker_url="none://", max_attempts=2)
    sid = services.submit(app, brief="library network", corpus=str(corpus), destinations=["memory:l"], actor="dana")[
        "saga_id"
    ]
    _expire(app, attempts=2)
    assert sweep_leases(app) == 1
    status = services.status(app, sid)
    assert status["state"] == "failed"
    assert "lost its lease 2 times" in status["reason"]

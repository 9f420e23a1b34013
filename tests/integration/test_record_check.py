"""The after-test audit itself: it sees the databases a test opened and names a saga whose
stored state its events do not explain."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from orchestrator.store.db import unit_of_work
from orchestrator.store.tables import SagaRow
from tests.integration.helpers import make_app, ready_saga
from tests.support import record_check


def test_the_after_test_audit_names_an_unexplained_saga(tmp_path: Path, corpus: Path, pg_url: str) -> None:
    apps = [make_app(f"sqlite:///{tmp_path / 'a.db'}", tmp_path), make_app(pg_url, tmp_path)]
    sagas = [ready_saga(app, corpus, [f"site:{tmp_path / 'site'}"])["saga_id"] for app in apps]
    assert record_check.check() == []
    for app, sid in zip(apps, sagas, strict=True):
        with unit_of_work(app.engine) as uow:
            saga = uow.session.get(SagaRow, sid)
            assert saga is not None
            saga.state = "approved"  # behind the events' back
    problems = record_check.check()
    assert sorted(problems) == sorted(
        f"saga {sid} ({app.engine.url.database}): state: stored approved, events give ready-for-review"
        for app, sid in zip(apps, sagas, strict=True)
    )
    for app, sid in zip(apps, sagas, strict=True):
        with unit_of_work(app.engine) as uow:
            saga = uow.session.get(SagaRow, sid)
            assert saga is not None
            saga.state = "ready-for-review"
        with Session(app.engine) as s:  # seen again: the hook audits it after this test
            assert s.get(SagaRow, sid) is not None

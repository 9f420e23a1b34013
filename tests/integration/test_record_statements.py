"""The prebuilt statements behind a saga's records, on SQLite and PostgreSQL: an artifact is
written once whoever stores it first, a saga's state is read outside any transaction, the
steps `start_execution` returns are the rows a fresh read finds, in position order, and a saga
found by its whole id is locked by the statement that finds it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, text
from sqlalchemy.exc import OperationalError

from orchestrator.core.errors import NotFound
from orchestrator.store.db import unit_of_work
from orchestrator.store.tables import ArtifactRow
from roles.artifacts import Draft
from roles.tools import load_artifact, store_artifact
from sagas import records
from sagas.execution_steps import start_execution
from sagas.machine import SagaState
from tests.integration.helpers import make_app, ready_saga, wait_for_a_lock_wait

DRAFT = Draft(title="Branches", markdown="# Branches\n\nThe bookmobile came first.\n", citations=())


def _submitted(url: str, tmp_path: Path, corpus: Path) -> tuple[Any, str]:
    """An app with no broker (nothing runs the roles) and a saga just submitted on it."""
    app = make_app(url, tmp_path, broker_url="none://")
    status = app.submissions.submit(
        brief="branches", corpus=str(corpus), destinations=["memory:a"], actor="dana"
    )
    return app, str(status["saga_id"])


def _artifacts(app, digest: str) -> int:  # type: ignore[no-untyped-def]
    with app.engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(ArtifactRow.digest == digest)).scalar_one())


def test_an_artifact_stored_twice_is_one_row_and_loads_as_it_was_stored(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app, sid = _submitted(either_db_url, tmp_path, corpus)
    with unit_of_work(app.engine) as uow:
        first = store_artifact(uow.session, sid, "draft", DRAFT)
        again = store_artifact(uow.session, sid, "draft", DRAFT)  # in the same transaction
        assert load_artifact(uow.session, first) == DRAFT.model_dump(mode="json"), "seen before the commit"
    with unit_of_work(app.engine) as uow:
        later = store_artifact(uow.session, sid, "draft", DRAFT)
    assert first == again == later == DRAFT.digest()
    assert _artifacts(app, first) == 1
    with unit_of_work(app.engine) as uow:
        assert Draft.model_validate(load_artifact(uow.session, first)) == DRAFT
        with pytest.raises(NotFound, match="no artifact"):
            load_artifact(uow.session, "0" * 64)


def test_on_postgresql_two_writers_of_one_artifact_both_commit_and_leave_one_row(
    pg_url: str, tmp_path: Path, corpus: Path
) -> None:
    app, sid = _submitted(pg_url, tmp_path, corpus)
    stored = threading.Event()
    errors: list[BaseException] = []

    def second_writer() -> None:
        try:
            stored.wait(10)
            with unit_of_work(app.engine) as uow:  # waits for the first writer's row, then writes nothing
                store_artifact(uow.session, sid, "draft", DRAFT)
        except BaseException as exc:
            errors.append(exc)

    other = threading.Thread(target=second_writer)
    other.start()
    with unit_of_work(app.engine) as uow:
        store_artifact(uow.session, sid, "draft", DRAFT)
        stored.set()
        wait_for_a_lock_wait(app.engine, "the second writer to wait for the first one's uncommitted row")
        assert other.is_alive()
    other.join(10)
    assert not other.is_alive() and errors == []
    assert _artifacts(app, DRAFT.digest()) == 1


def test_a_sagas_state_is_read_in_one_statement_and_a_missing_saga_is_not_found(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app, sid = _submitted(either_db_url, tmp_path, corpus)
    assert records.state_of(app.engine, sid) is SagaState.PREPARING
    with pytest.raises(NotFound, match="no saga"):
        records.state_of(app.engine, "f" * 32)


def test_start_execution_returns_the_rows_a_fresh_read_finds_in_position_order(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    dests = ["memory:z", "memory:b", "memory:a"]  # listed against the order of their names
    app = make_app(either_db_url, tmp_path)
    sid = ready_saga(app, corpus, dests)["saga_id"]
    quiet = make_app(either_db_url, tmp_path, broker_url="none://")  # nothing runs the publisher
    digest = quiet.reviews.approve(sid, version=1, actor="erin")["version_digest"]
    with unit_of_work(quiet.engine) as uow:
        saga = records.load_saga(uow.session, sid, lock=True)
        made = start_execution(uow.session, saga, digest, records.steps(uow.session, sid))
        assert [(s.uri, s.position) for s in made] == [(uri, i) for i, uri in enumerate(dests)]
    with unit_of_work(quiet.engine) as uow:
        read = records.steps(uow.session, sid)
        assert [(s.id, s.uri, s.position, s.state, s.idempotency_key) for s in read] == [
            (s.id, s.uri, s.position, s.state, s.idempotency_key) for s in made
        ]
        assert records.load_saga(uow.session, sid).state == SagaState.EXECUTING
        saga = records.load_saga(uow.session, sid, lock=True)
        again = start_execution(uow.session, saga, digest, read)  # once made, the same rows
        assert [s.id for s in again] == [s.id for s in made]


def _saga_reads(app: Any, sid: str, prefix: str) -> list[str]:
    """The statements `find_saga(prefix, lock=True)` sends, in a unit of work that finds `sid`."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()))

    event.listen(app.engine, "before_cursor_execute", record)
    try:
        with unit_of_work(app.engine) as uow:
            assert records.find_saga(uow.session, prefix, lock=True).id == sid
    finally:
        event.remove(app.engine, "before_cursor_execute", record)
    return [s for s in seen if s.startswith("SELECT") and "FROM sagas" in s]


def test_a_saga_found_by_its_whole_id_is_locked_in_the_statement_that_finds_it(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app, sid = _submitted(either_db_url, tmp_path, corpus)
    whole = _saga_reads(app, sid, sid)
    # A prefix: tried as a whole id (no row), matched unlocked, then its saga locked.
    by_prefix = _saga_reads(app, sid, sid[:8])
    assert len(whole) == 1 and len(by_prefix) == 3
    assert "LIKE" in by_prefix[1]
    if app.engine.dialect.name == "postgresql":  # SQLite has no row locks: its write lock serializes
        assert whole[0].endswith("FOR UPDATE") and by_prefix[-1].endswith("FOR UPDATE")
        assert not by_prefix[1].endswith("FOR UPDATE")


def test_on_postgresql_a_saga_found_with_lock_is_held_until_the_commit(
    pg_url: str, tmp_path: Path, corpus: Path
) -> None:
    app, sid = _submitted(pg_url, tmp_path, corpus)
    for prefix in (sid, sid[:8]):
        with unit_of_work(app.engine) as uow:
            records.find_saga(uow.session, prefix, lock=True)
            with (
                app.engine.connect() as other,
                pytest.raises(OperationalError, match="could not obtain lock"),
            ):
                other.execute(text("SELECT id FROM sagas WHERE id = :sid FOR UPDATE NOWAIT"), {"sid": sid})
        with app.engine.connect() as other:  # committed: free again
            other.execute(text("SELECT id FROM sagas WHERE id = :sid FOR UPDATE NOWAIT"), {"sid": sid})

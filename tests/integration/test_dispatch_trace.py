"""A message queued by a process with tracing off still carries its saga's trace, on SQLite
and PostgreSQL: the context comes from the session's copy of the saga when it holds one,
and from one read of the column otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from sqlalchemy import event, update
from sqlmodel import select

from orchestrator.core.routing import TASKS
from orchestrator.store.db import unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import SagaRow
from sagas import records
from tests.integration.helpers import make_app

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SAGA_TRACE = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
TASK = next(t for t, q in TASKS.items() if q == "writer")
READ_TRACE_CONTEXT = "SELECT sagas.trace_context"


@pytest.fixture
def app(either_db_url: str, tmp_path: Path) -> Iterator[Any]:
    app = make_app(either_db_url, tmp_path, broker_url="none://")
    assert not trace.get_current_span().get_span_context().is_valid, "no trace is current here"
    yield app
    app.close()


def _traced_saga(app: Any, corpus: Path) -> str:
    """A saga whose trace began in a process with tracing on (its context is stored)."""
    status = app.submissions.submit(
        brief="branches", corpus=str(corpus), destinations=["memory:a"], actor="dana"
    )
    sid = str(status["saga_id"])
    with unit_of_work(app.engine) as uow:
        uow.session.connection().execute(
            update(SagaRow).where(SagaRow.id == sid).values(trace_context=SAGA_TRACE)
        )
    return sid


@contextmanager
def _statements(app: Any) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(app.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(app.engine, "before_cursor_execute", record)


def _trace_of(app: Any, message_id: str) -> str:
    with unit_of_work(app.engine) as uow:
        row = uow.session.exec(select(OutboxRow).where(OutboxRow.id == message_id)).one()
    traceparent = str(row.headers.get("traceparent", ""))
    return traceparent.split("-")[1] if traceparent else ""


def test_a_saga_loaded_in_the_unit_of_work_gives_its_trace_without_a_read(app: Any, corpus: Path) -> None:
    sid = _traced_saga(app, corpus)
    with _statements(app) as seen, unit_of_work(app.engine) as uow:
        saga = records.load_saga(uow.session, sid)  # held, as a handler holds the saga it changes
        message_id = app.dispatcher.dispatch(uow, saga_id=saga.id, task=TASK)
    assert not [s for s in seen if s.startswith(READ_TRACE_CONTEXT)]
    assert _trace_of(app, message_id) == TRACE_ID


def test_a_saga_the_session_does_not_hold_is_read_for_its_trace(app: Any, corpus: Path) -> None:
    sid = _traced_saga(app, corpus)
    with _statements(app) as seen, unit_of_work(app.engine) as uow:
        message_id = app.dispatcher.dispatch(uow, saga_id=sid, task=TASK)
    assert len([s for s in seen if s.startswith(READ_TRACE_CONTEXT)]) == 1
    assert _trace_of(app, message_id) == TRACE_ID


def test_a_saga_whose_trace_column_expired_is_read_again(app: Any, corpus: Path) -> None:
    sid = _traced_saga(app, corpus)
    with _statements(app) as seen, unit_of_work(app.engine) as uow:
        saga = records.load_saga(uow.session, sid)
        uow.session.expire(saga, ["trace_context"])
        message_id = app.dispatcher.dispatch(uow, saga_id=sid, task=TASK)
    assert len([s for s in seen if s.startswith(READ_TRACE_CONTEXT)]) == 1
    assert _trace_of(app, message_id) == TRACE_ID


def test_submitting_queues_the_research_without_reading_the_trace_back(app: Any, corpus: Path) -> None:
    with _statements(app) as seen:
        app.submissions.submit(brief="branches", corpus=str(corpus), destinations=["memory:a"], actor="dana")
    assert [s for s in seen if "INSERT INTO outbox" in s], "the research was queued"
    assert not [s for s in seen if s.startswith(READ_TRACE_CONTEXT)]


def test_a_saga_with_no_stored_trace_queues_a_message_with_none(app: Any, corpus: Path) -> None:
    status = app.submissions.submit(
        brief="branches", corpus=str(corpus), destinations=["memory:a"], actor="dana"
    )
    sid = str(status["saga_id"])
    with unit_of_work(app.engine) as uow:
        saga = records.load_saga(uow.session, sid)
        message_id = app.dispatcher.dispatch(uow, saga_id=saga.id, task=TASK)
    assert _trace_of(app, message_id) == ""

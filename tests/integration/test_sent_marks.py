"""The producer's sent-marks: written in batches by a thread of the process, off the
sending path, and still written when a short-lived command exits right after sending."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlmodel import Session, col, select

from orchestrator.store.db import make_engine, unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import utcnow
from outbox.messages import Envelope
from outbox.writer import Outbox, SentMarks, envelope_of
from tests.conftest import base_env
from tests.support.processes import submit, wait_until


class TakesAll:
    system = "test"

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, envelope: Envelope) -> None:
        self.sent.append(envelope.message_id)


def _rows(engine_url: str, count: int) -> tuple[list[Envelope], Outbox, TakesAll]:
    engine = make_engine(engine_url)
    broker = TakesAll()
    outbox = Outbox(engine, broker)
    envelopes = []
    with unit_of_work(engine) as uow:
        for i in range(count):
            row = OutboxRow(saga_id=None, task="pressroom.writer.draft", queue="writer", payload={"n": i})
            uow.session.add(row)
            envelopes.append(envelope_of(row))
    return envelopes, outbox, broker


def _unsent(outbox: Outbox) -> set[str]:
    with Session(outbox.engine) as s:
        return set(s.exec(select(OutboxRow.id).where(col(OutboxRow.sent_at).is_(None))).all())


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    return sqlite_url if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


def test_rows_sent_together_are_marked_by_one_update_off_the_sending_path(url: str) -> None:
    envelopes, outbox, broker = _rows(url, 40)
    outbox.marks = SentMarks(outbox.engine, interval=0.5)
    updates: list[str] = []

    @event.listens_for(outbox.engine, "before_cursor_execute")
    def count(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("UPDATE OUTBOX"):
            updates.append(statement)

    assert outbox.send_now(envelopes) == 40
    assert broker.sent == [e.message_id for e in envelopes]
    assert updates == [], "a mark was written on the sending path"
    assert outbox.marks.pending() == 40
    wait_until(lambda: not _unsent(outbox), timeout=10, what="the sent-marks")
    assert len(updates) == 1, updates
    with Session(outbox.engine) as s:
        attempts = s.exec(select(OutboxRow.send_attempts)).all()
    assert sorted(attempts) == [1] * 40


def test_flush_writes_queued_marks_now_and_leaves_a_row_the_relay_marked_alone(url: str) -> None:
    envelopes, outbox, _ = _rows(url, 2)
    marks = SentMarks(outbox.engine, interval=60)  # its thread would wait a minute
    with unit_of_work(outbox.engine) as uow:  # the relay marked the first row meanwhile
        row = uow.session.get(OutboxRow, envelopes[0].message_id)
        assert row is not None
        row.sent_at, row.send_attempts = utcnow(), 1
    for env in envelopes:
        marks.add(env.message_id, utcnow())
    assert marks.flush() == 1
    assert marks.pending() == 0 and not _unsent(outbox)
    with Session(outbox.engine) as s:
        assert s.exec(select(OutboxRow.send_attempts)).all() == [1, 1]


def test_a_batch_the_database_refuses_is_left_for_the_relay(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    envelopes, outbox, _ = _rows(sqlite_url, 1)
    elsewhere = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    with elsewhere.begin() as conn:
        conn.exec_driver_sql("DROP TABLE outbox")  # every UPDATE of this batch fails
    broken = SentMarks(elsewhere, interval=60)
    broken.add(envelopes[0].message_id, utcnow())
    with caplog.at_level(logging.WARNING, logger="outbox.writer"):
        assert broken.flush() == 0
    assert "left for the relay" in caplog.text
    assert _unsent(outbox) == {envelopes[0].message_id}


def test_a_command_that_sends_and_exits_leaves_its_row_marked_sent(
    pg_url: str, redis_url: str, corpus: Path, tmp_path: Path
) -> None:
    env = base_env(PRESSROOM_DATABASE_URL=pg_url, PRESSROOM_BROKER_URL=redis_url)
    submit(env, corpus, f"site:{tmp_path / 'site'}")
    engine = make_engine(pg_url)
    with Session(engine) as s:
        rows = s.exec(select(OutboxRow)).all()
    assert [(r.send_attempts, r.sent_at is not None) for r in rows] == [(1, True)]


def test_marks_are_written_by_a_thread_that_stops_when_idle(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import outbox.writer as writer

    monkeypatch.setattr(writer, "IDLE_SECONDS", 0.2)
    envelopes, outbox, _ = _rows(url, 2)
    outbox.send_now(envelopes[:1])
    thread = outbox.marks._thread
    assert thread is not None and thread.is_alive()
    wait_until(lambda: not thread.is_alive(), timeout=10, what="the idle thread to stop")
    outbox.send_now(envelopes[1:])  # a new thread takes the next mark
    wait_until(lambda: not _unsent(outbox), timeout=10, what="the second mark")


def test_a_mark_queued_while_the_thread_waits_idle_is_written_without_waiting_it_out(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import outbox.writer as writer

    monkeypatch.setattr(writer, "IDLE_SECONDS", 600.0)
    envelopes, outbox, _ = _rows(url, 2)
    outbox.send_now(envelopes[:1])
    wait_until(lambda: not outbox.marks.pending(), timeout=10, what="the first mark")
    outbox.send_now(envelopes[1:])  # the thread is waiting for work, up to 600 s
    wait_until(lambda: not _unsent(outbox), timeout=10, what="the second mark")


def test_a_forked_child_starts_without_the_parents_marks_or_locks(sqlite_url: str) -> None:
    import os

    envelopes, outbox, _ = _rows(sqlite_url, 2)
    marks = SentMarks(outbox.engine, interval=60)
    marks.add(envelopes[0].message_id, utcnow())  # the parent's, queued
    marks._writing.acquire()  # as if the parent's thread were writing a batch at the fork
    try:
        pid = os.fork()
        if pid == 0:  # the child: exits with what it found
            code = 1
            try:
                if marks.pending() == 0:
                    marks.add(envelopes[1].message_id, utcnow())
                    code = 0 if marks.flush() == 1 else 2
            finally:
                os._exit(code)
    finally:
        marks._writing.release()
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    if done == (0, 0):
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the child hung on a lock it inherited")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert _unsent(outbox) == {envelopes[0].message_id}, "the child marked its own row, not the parent's"
    assert marks.flush() == 1  # the parent's mark is still the parent's to write


def test_closing_an_app_writes_its_marks_and_stops_writing(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import outbox.writer as writer
    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings

    monkeypatch.setattr(writer, "IDLE_SECONDS", 600.0)  # only closing ends the thread in time
    url = f"sqlite:///{tmp_path / 'p.db'}"
    app = build_app(Settings(database_url=url, broker_url="inline://", secret="t"))
    app.submissions.submit(
        brief="history of the library network",
        corpus=str(corpus),
        destinations=[f"site:{tmp_path / 'site'}"],
        actor="dana",
    )
    thread = app.outbox.marks._thread
    app.close()
    assert app.outbox.marks.pending() == 0
    if thread is not None:  # the thread ends at once: nothing writes to the database after close
        thread.join(timeout=10)
        assert not thread.is_alive()
    engine = make_engine(url)
    with Session(engine) as s:
        rows = s.exec(select(OutboxRow)).all()
    assert rows and all(r.sent_at is not None for r in rows)

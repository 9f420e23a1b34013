"""The `/ops` page's reads (`orchestrator.reads.ops_view.read_ops`) on SQLite and PostgreSQL:
open work per queue and task from live sagas only, the outbox's unsent rows, and per
live state the sagas unchanged the longest (at most `STUCK_PER_STATE`), each with the
work or destination it waits on."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from orchestrator.reads.ops_view import STUCK_PER_STATE, read_ops
from orchestrator.store.db import unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import SagaRow, StepRow, WorkRow
from tests.integration.helpers import make_app

# The rows are written directly (no events) to give each one an exact age.
pytestmark = pytest.mark.record_edited

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


@pytest.fixture
def app(either_db_url: str, tmp_path: Path) -> Iterator[Any]:
    app = make_app(either_db_url, tmp_path, broker_url="none://")
    yield app
    app.close()


def saga(session: Any, sid: str, state: str, changed_minutes_ago: float) -> None:
    session.add(
        SagaRow(
            id=sid, brief="b", corpus="c", state=state, created_by="dana", updated_at=ago(changed_minutes_ago)
        )
    )


def work(session: Any, sid: str, task: str, *, made: float, lease: float, done: bool = False) -> None:
    session.add(
        WorkRow(
            saga_id=sid,
            task=task,
            queue=task.split(".")[1],
            payload={"saga_id": sid},
            created_at=ago(made),
            lease_until=ago(lease),
            done_at=ago(0) if done else None,
        )
    )


def fill(app: Any) -> None:
    with unit_of_work(app.engine) as uow:
        s = uow.session
        saga(s, "prep-old", "preparing", 50)
        saga(s, "prep-new", "preparing", 5)
        saga(s, "review-wait", "ready-for-review", 30)
        saga(s, "exec", "executing", 20)
        saga(s, "unknown", "effect-unknown", 90)
        saga(s, "done", "succeeded", 500)
        saga(s, "approved", "approved", 3)
        # prep-old waits on its oldest open work row (the newer one and the done one don't count)
        work(s, "prep-old", "pressroom.researcher.research", made=48, lease=47)
        work(s, "prep-old", "pressroom.writer.draft", made=10, lease=-5)
        work(s, "prep-old", "pressroom.reviewer.review", made=60, lease=59, done=True)
        work(s, "prep-new", "pressroom.researcher.research", made=4, lease=-1)
        # a finished saga's forgotten row is not waited on by anyone
        work(s, "done", "pressroom.researcher.research", made=400, lease=399)
        s.add(StepRow(saga_id="exec", position=0, uri="site:/a", state="done"))
        s.add(StepRow(saga_id="exec", position=1, uri="git:/b", state="executing"))
        s.add(StepRow(saga_id="unknown", position=0, uri="webhook:http://h/x", state="uncertain"))
        for state in ("ready-for-review",):
            for n in range(STUCK_PER_STATE + 2):
                saga(s, f"many-{n}", state, 10 + n)
        s.add(OutboxRow(task="pressroom.writer.draft", queue="writer", payload={}, created_at=ago(7)))
        s.add(OutboxRow(task="pressroom.writer.draft", queue="writer", payload={}, created_at=ago(2)))
        s.add(
            OutboxRow(
                task="pressroom.researcher.research",
                queue="researcher",
                payload={},
                created_at=ago(100),
                sent_at=ago(99),
            )
        )


def test_the_page_reads_open_work_the_outbox_and_the_stuck_sagas(app: Any) -> None:
    fill(app)
    view = read_ops(app.engine, NOW)

    by_task = {(w.queue, w.task): w for w in view.open_work}
    research = by_task[("researcher", "pressroom.researcher.research")]
    assert research.count == 2 and research.oldest_at == ago(48) and research.earliest_lease == ago(47)
    assert by_task[("writer", "pressroom.writer.draft")].count == 1
    assert ("reviewer", "pressroom.reviewer.review") not in by_task  # done work is not open

    assert [(u.queue, u.count, u.oldest_at) for u in view.unsent] == [("writer", 2, ago(7))]

    preparing = view.stuck["preparing"]
    assert [s.saga_id for s in preparing] == ["prep-old", "prep-new"]
    assert preparing[0].waits_on == "work pressroom.researcher.research"
    assert preparing[0].lease_until == ago(47) and preparing[0].since == ago(50)
    reviews = view.stuck["ready-for-review"]
    assert len(reviews) == STUCK_PER_STATE
    assert reviews[0].saga_id == "review-wait" and reviews[0].waits_on == "a reviewer's decision"
    assert [s.saga_id for s in reviews[1:]] == ["many-6", "many-5", "many-4", "many-3"]
    assert view.stuck["executing"][0].waits_on == "git:/b (executing)"
    assert view.stuck["effect-unknown"][0].waits_on == "webhook:http://h/x (uncertain)"
    assert [s.saga_id for s in view.stuck["approved"]] == ["approved"]
    assert "succeeded" not in view.stuck


def test_every_stuck_saga_query_is_limited(app: Any) -> None:
    fill(app)
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()).upper())

    event.listen(app.engine, "before_cursor_execute", record)
    try:
        read_ops(app.engine, NOW)
    finally:
        event.remove(app.engine, "before_cursor_execute", record)
    per_state = [s for s in seen if s.startswith("SELECT SAGAS.ID, SAGAS.STATE, SAGAS.UPDATED_AT")]
    assert len(per_state) == 5 and all("LIMIT" in s for s in per_state)
    assert all("FROM WORK" not in s or "WORK.SAGA_ID IN" in s for s in seen)

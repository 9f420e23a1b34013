"""A saga's destinations are published concurrently, on SQLite and PostgreSQL.

Exactly one effect per key even when two runners race on one saga; a failure
while others are in flight undoes them in reverse order of completion; a
destination that stalls with no status to ask leaves the saga honestly
`effect-unknown`, with what completed still live.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlmodel import Session, select

from orchestrator.core.errors import RetryLater
from orchestrator.core.routing import PUBLISH
from orchestrator.store.tables import WorkRow
from outbox.messages import Handoff
from tests.integration.helpers import make_app, ready_saga
from tests.support.webhook_server import WebhookServer

# Timing windows (the order of completions is read from arrival times): run alone, not beside another file.
pytestmark = pytest.mark.serial


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


def test_a_failure_undoes_what_completed_last_first(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path, destination_timeout=10.0)
    with (
        WebhookServer() as fast,
        WebhookServer("stall", stall_seconds=1.0) as slow,
        WebhookServer("reject") as bad,
    ):
        saga = ready_saga(app, corpus, [f"webhook:{slow.url}", f"webhook:{fast.url}", f"webhook:{bad.url}"])
        app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        status = app.reads.status(saga["saga_id"])
        assert status["state"] == "failed", status
        assert {d["state"] for d in status["destinations"]} == {"compensated", "failed"}
        assert fast.applied == {} and slow.applied == {} and bad.apply_count == 0
        posts = {
            name: next(r.at for r in hook.received if r.method == "POST")
            for name, hook in (("fast", fast), ("slow", slow), ("bad", bad))
        }
        assert max(posts.values()) - min(posts.values()) < 0.9, (
            "all three were sent before the slow one answered"
        )
        undo_fast = next(r.at for r in fast.received if r.method == "DELETE")
        undo_slow = next(r.at for r in slow.received if r.method == "DELETE")
        assert undo_slow < undo_fast, "the slow one completed last, so it is undone first"


def test_a_stall_with_no_status_is_effect_unknown_and_keeps_the_rest(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)  # 0.5 s timeout
    site = tmp_path / "site"
    with WebhookServer("stall", stall_seconds=2.0, status=False) as stuck:
        saga = ready_saga(app, corpus, [f"site:{site}", f"webhook:{stuck.url}"])
        app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        status = app.reads.status(saga["saga_id"])
        assert status["state"] == "effect-unknown", status
        assert {d["uri"]: d["state"] for d in status["destinations"]} == {
            f"site:{site}": "done",
            f"webhook:{stuck.url}": "uncertain",
        }
        assert len(list(site.glob("*.md"))) == 1, "nothing is undone while a person has to decide"
        posts = [r for r in stuck.received if r.method == "POST"]
        assert len(posts) == 1, "an uncertain publish is not sent again (its status was asked: GET)"


def test_two_runners_racing_on_one_saga_make_one_effect_per_key(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    with WebhookServer("stall", stall_seconds=0.5) as one, WebhookServer("stall", stall_seconds=0.5) as two:
        inline = make_app(db_url, tmp_path)
        saga = ready_saga(inline, corpus, [f"webhook:{one.url}", f"webhook:{two.url}"])["saga_id"]
        # The approval's publish message stays in the outbox: the test runs the publisher itself.
        app = make_app(db_url, tmp_path, broker_url="none://", destination_timeout=10.0)
        app.reviews.approve(saga, version=1, actor="erin")
        with Session(app.engine) as s:
            work = s.exec(select(WorkRow).where(WorkRow.saga_id == saga, WorkRow.task == PUBLISH)).one()
        handoff = Handoff.model_validate(work.payload)
        deferred: list[str] = []

        def run() -> None:
            try:
                app.runner.handle(handoff, "racer")
            except RetryLater as exc:
                deferred.append(str(exc))

        racers = [threading.Thread(target=run) for _ in range(2)]
        for t in racers:
            t.start()
        for t in racers:
            t.join(timeout=60)
        app.runner.handle(handoff, "racer")  # whoever was held back goes on once the keys settle
        assert app.reads.status(saga)["state"] == "succeeded"
        assert one.apply_count == 1 and two.apply_count == 1
        assert len([r for r in one.received if r.method == "POST"]) == 1, "the second runner never sent"

"""Operators' controls on SQLite and PostgreSQL: approval expiry moved back by
the sweeper alone (time passed in), overdue reviews, and a dead letter that,
once its cause is fixed, is requeued and carries the saga on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.core.errors import NotFound, Refused
from orchestrator.core.routing import RESEARCH
from orchestrator.pressroom import Pressroom
from outbox.handlers import Finalizer
from outbox.messages import Handoff
from tests.integration.helpers import make_app, ready_saga


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


def events_of(app: Pressroom, saga_id: str) -> list[tuple[str, str, str]]:
    return [(e["actor"], e["kind"], e["status"]) for e in app.reads.history(saga_id)["events"]]


def test_a_lapsed_approval_goes_back_to_review_in_one_sweep(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    site = tmp_path / "site"
    saga = ready_saga(app, corpus, [f"site:{site}"])
    sid = saga["saga_id"]
    app.consumer.auto_drain = False  # the publisher is down: the saga waits in `approved`
    approval = app.reviews.approve(sid, version=saga["version"], actor="erin", expires_in="10m")
    expires = datetime.fromisoformat(approval["expires_at"].replace("Z", "+00:00"))
    assert app.reads.status(sid)["state"] == "approved"

    assert app.operations.sweep_lapsed_approvals(now=expires - timedelta(seconds=1)) == 0
    assert app.reads.status(sid)["state"] == "approved"
    assert app.operations.sweep_lapsed_approvals(now=expires + timedelta(seconds=1)) == 1
    status = app.reads.status(sid)
    assert status["state"] == "ready-for-review" and "approval expired" in status["reason"]
    assert ("sweeper", "transition", "ready-for-review") in events_of(app, sid)
    assert app.operations.sweep_lapsed_approvals(now=expires + timedelta(seconds=2)) == 0

    # The publish that was queued finds nothing to do; nothing is published.
    app.consumer.auto_drain = True
    app.consumer.drain()
    assert app.reads.status(sid)["state"] == "ready-for-review"
    assert not site.exists() or not list(site.glob("*.md"))
    # A fresh approval publishes as usual.
    app.reviews.approve(sid, version=saga["version"], actor="erin")
    assert app.reads.status(sid)["state"] == "succeeded"


def test_overdue_reviews_are_listed_and_counted(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path, review_reminder="2h")
    first = ready_saga(app, corpus, [f"site:{tmp_path / 'a'}"])["saga_id"]
    count = app.operations.count_overdue_reviews(now=lambda: datetime.now(UTC) + timedelta(hours=3))
    assert count() == 1
    assert app.operations.count_overdue_reviews()() == 0
    assert app.reads.status(waiting=True)["sagas"] == []
    unset = make_app(db_url, tmp_path)
    assert [s["saga_id"] for s in unset.reads.status(waiting=True)["sagas"]] == [first]
    assert unset.operations.count_overdue_reviews()() == 0


def test_a_dead_letter_is_requeued_once_its_cause_is_fixed(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path)
    real = app.handlers[RESEARCH]
    broken = {"on": True}

    def research(handoff: Handoff, holder: str) -> Finalizer:
        if broken["on"]:
            raise Refused("the corpus index is not built yet")
        return real(handoff, holder)

    app.handlers[RESEARCH] = research
    out = app.submissions.submit(
        brief="history of the library network",
        corpus=str(corpus),
        destinations=[f"site:{tmp_path / 'site'}"],
        actor="dana",
    )
    sid = out["saga_id"]
    assert out["state"] == "preparing"
    (letter,) = app.operations.list_dead_letters()["dead_letters"]
    assert letter["saga_id"] == sid and letter["task"] == RESEARCH
    assert "Refused: the corpus index is not built yet" in letter["reason"]
    assert letter["body"]["saga_id"] == sid and letter["requeued_at"] is None
    assert ("pressroom.researcher.research", "message", "dead-letter") in events_of(app, sid)
    # Its work is finished, so the lease sweeper does not send a known poison again.
    assert app.relay.sweep() == 0

    broken["on"] = False
    again = app.operations.requeue_dead_letter(letter["id"], actor="olga")
    assert again["requeued_by"] == "olga" and again["requeued_as"]
    assert app.reads.status(sid)["state"] == "ready-for-review"
    assert ("olga", "message", "requeued") in events_of(app, sid)
    with pytest.raises(Refused, match="requeued already"):
        app.operations.requeue_dead_letter(letter["id"], actor="olga")
    with pytest.raises(NotFound):
        app.operations.requeue_dead_letter("no-such-letter", actor="olga")
    assert len(app.operations.list_dead_letters()["dead_letters"]) == 1


def test_the_relay_prunes_on_its_schedule_with_retention_set(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    from sqlalchemy import text

    from orchestrator.retention import RetentionSchedule

    app = make_app(db_url, tmp_path, retention="1d", reconcile_window="1d")
    saga = ready_saga(app, corpus, [f"site:{tmp_path / 'site'}"])
    app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
    assert app.reads.status(saga["saga_id"])["state"] == "succeeded"
    old = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=3)
    with app.engine.begin() as conn:
        conn.execute(text("UPDATE sagas SET updated_at = :t"), {"t": old})
        conn.execute(text("UPDATE ledger SET updated_at = :t"), {"t": old})
    clock = [0.0]
    schedule = RetentionSchedule(3600, clock=lambda: clock[0])
    assert app.operations.scheduled_prune(schedule) > 0
    left = app.reads.history(saga["saga_id"])["events"]
    assert [(e["actor"], e["kind"], e["status"]) for e in left] == [("retention", "saga", "pruned")]
    assert app.operations.scheduled_prune(schedule) == 0  # not due again for an hour
    clock[0] += 3600
    assert app.operations.scheduled_prune(schedule) == 0  # due, and nothing is left
    unset = make_app(db_url, tmp_path)
    assert unset.operations.scheduled_prune(RetentionSchedule(3600)) == 0

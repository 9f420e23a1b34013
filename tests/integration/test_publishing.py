"""The publishing saga against real files, real git and a real local webhook
server, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.core.clock import ManualClock
from orchestrator.core.errors import InvalidInput, Refused
from orchestrator.store.outbox_tables import OutboxRow
from outbox.messages import Envelope
from sagas.destinations.memory import memory_store, reset_memory_stores
from tests.integration.helpers import make_app, ready_saga, tools_called
from tests.support.webhook_server import WebhookServer


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(autouse=True)
def _fresh_memory() -> None:
    reset_memory_stores()


def test_second_destination_fails_definitely_first_is_compensated(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    site = tmp_path / "site"
    with WebhookServer("reject") as hook:
        url = hook.url
        saga = ready_saga(app, corpus, [f"site:{site}", f"webhook:{url}"])
        out = app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        status = app.reads.status(saga["saga_id"])
        assert status["state"] == "failed", status
        assert hook.apply_count == 0
    assert not list(site.glob("*.md")), "the site page was compensated"
    states = {d["uri"]: d["state"] for d in status["destinations"]}
    assert states == {f"site:{site}": "compensated", f"webhook:{url}": "failed"}
    # The two destinations are published concurrently: either may answer first.
    assert sorted(tools_called(app, saga["saga_id"], "publish")) == ["error", "ok"]
    assert tools_called(app, saga["saga_id"], "publish.compensate") == ["ok"]
    assert out["version_digest"] == saga["version_digest"]


def test_stall_without_status_is_effect_unknown_until_a_person_confirms(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    with WebhookServer("stall", stall_seconds=3, status=False) as hook:
        saga = ready_saga(app, corpus, [f"webhook:{hook.url}"])
        sid = saga["saga_id"]
        app.reviews.approve(sid, version=saga["version"], actor="erin")
        assert app.reads.status(sid)["state"] == "effect-unknown"
        assert hook.posts == 1 and hook.apply_count == 1
        # Nothing retries an uncertain step on its own: run the publisher again.
        app.relay.sweep()
        app.consumer.drain()
        assert hook.posts == 1
        with pytest.raises(InvalidInput):
            app.reviews.reconcile(
                sid, destination=f"webhook:{hook.url}", outcome="confirmed", actor="", reason="x"
            )
        status = app.reviews.reconcile(
            sid,
            destination=f"webhook:{hook.url}",
            outcome="confirmed",
            actor="frank",
            reason="seen in the CMS",
        )
        assert status["state"] == "succeeded"
        assert hook.posts == 1, "confirmed never calls the destination again"
    events = app.reads.history(sid)["events"]
    rec = [e for e in events if e["kind"] == "reconcile"]
    assert rec and rec[0]["actor"] == "frank" and rec[0]["detail"]["reason"] == "seen in the CMS"


def test_stall_with_status_endpoint_resolves_without_a_person(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    with WebhookServer("stall", stall_seconds=3) as hook:
        saga = ready_saga(app, corpus, [f"webhook:{hook.url}"])
        app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        status = app.reads.status(saga["saga_id"])
        assert status["state"] == "succeeded", status
        assert hook.posts == 1 and hook.requests["GET"] == 1
        assert (
            status["destinations"][0]["receipt"]["idempotency_key"]
            == status["destinations"][0]["idempotency_key"]
        )


def test_reconcile_absent_lets_the_step_run_again_with_the_same_key(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    with WebhookServer("stall", stall_seconds=3, status=False) as hook:
        saga = ready_saga(app, corpus, [f"webhook:{hook.url}"])
        sid = saga["saga_id"]
        app.reviews.approve(sid, version=saga["version"], actor="erin")
        key = app.reads.status(sid)["destinations"][0]["idempotency_key"]
        hook.set_mode("normal")
        status = app.reviews.reconcile(
            sid,
            destination=f"webhook:{hook.url}",
            outcome="absent",
            actor="frank",
            reason="not in the CMS",
        )
        assert status["state"] == "succeeded"
        assert [r.key for r in hook.received if r.method == "POST"] == [key, key]
        assert hook.apply_count == 1, "the receiver's key dedupe held: one effect"


def test_publish_message_delivered_twice_and_approve_twice_give_one_effect(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    saga = ready_saga(app, corpus, ["memory:twice"])
    sid = saga["saga_id"]
    app.reviews.approve(sid, version=saga["version"], actor="erin")
    with pytest.raises(Refused):
        app.reviews.approve(sid, version=saga["version"], actor="erin")
    from sqlmodel import Session, select

    with Session(app.engine) as s:
        row = s.exec(select(OutboxRow).where(OutboxRow.task == "pressroom.publisher.publish")).one()
        env = Envelope(
            message_id=row.id, task=row.task, queue=row.queue, payload=row.payload, headers=row.headers
        )
    assert app.consumer.handle(env) == "duplicate"
    copy = env.model_copy(update={"message_id": "redelivered-copy"})
    assert app.consumer.handle(copy) == "lease-held"
    assert memory_store("twice").effects == 1
    assert app.reads.status(sid)["state"] == "succeeded"


def test_edit_after_approval_voids_it_and_nothing_publishes_until_v2_is_approved(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    held = make_app(db_url, tmp_path, broker_url="none://")  # the publish message waits in the outbox
    saga = ready_saga(make_app(db_url, tmp_path), corpus, ["memory:edits"])
    sid = saga["saga_id"]
    held.reviews.approve(sid, version=1, actor="erin")
    edited = tmp_path / "v2.md"
    v1 = held.reads.show(sid, 1)
    edited.write_text(v1["markdown"].replace("\n## ", "\n## Reviewed by the desk: ", 1), encoding="utf-8")
    app = make_app(db_url, tmp_path)
    status = app.reviews.edit(sid, path=str(edited), actor="gina")
    assert status["version"] == 2
    assert status["approval"]["voided_at"] is not None
    app.relay.run_once()  # the old publish message is finally delivered
    app.consumer.drain()
    assert memory_store("edits").effects == 0, "a voided approval publishes nothing"
    assert app.reads.status(sid)["state"] == "ready-for-review", app.reads.show(sid, 2)["review"]
    app.reviews.approve(sid, version=2, actor="erin")
    assert memory_store("edits").effects == 1
    assert app.reads.status(sid)["state"] == "succeeded"


def test_expired_approval_sends_the_saga_back_for_a_new_one(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    clock = ManualClock(datetime.now(UTC))
    held = make_app(db_url, tmp_path, broker_url="none://", clock=clock)
    saga = ready_saga(make_app(db_url, tmp_path), corpus, ["memory:late"])
    sid = saga["saga_id"]
    held.reviews.approve(sid, version=1, actor="erin", expires_in="1s")
    clock.advance(2)  # the approval expires on the clock the app is given: no waiting
    app = make_app(db_url, tmp_path, clock=clock)
    app.relay.run_once()
    app.consumer.drain()
    status = app.reads.status(sid)
    assert status["state"] == "ready-for-review" and "expired" in (status["reason"] or "")
    assert memory_store("late").effects == 0


def test_site_page_bytes_equal_the_version(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path)
    saga = ready_saga(app, corpus, [f"site:{tmp_path / 'site'}"])
    app.reviews.approve(saga["saga_id"], version=1, actor="erin")
    status = app.reads.status(saga["saga_id"])
    page = Path(status["destinations"][0]["receipt"]["path"])
    assert hashlib.sha256(page.read_bytes()).hexdigest() == status["version_digest"]

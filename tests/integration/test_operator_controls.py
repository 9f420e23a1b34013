"""Failures that end honestly and an operator's controls, on SQLite and PostgreSQL.

An undo that fails (definitely, or by hanging past the timeout) leaves its
step `compensation-failed` and the saga `effect-unknown` with the page still
live; `retry` runs the undo again once the destination recovers, `reconcile`
settles it by a person's word. `retry` of a failed saga publishes again only
what is not live, with the same keys; `cancel` while executing stops before
the next step and undoes; `fork` starts a new saga at ready-for-review.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from orchestrator.core.errors import IllegalTransition, NotFound, Refused, SelfApproval
from orchestrator.pressroom import Pressroom
from telemetry import metrics, names, setup
from tests.integration.helpers import make_app, ready_saga
from tests.support.metric_points import counted
from tests.support.webhook_server import WebhookServer

# Timing windows (a cancel lands inside a slow destination's answer window): run alone, not beside another file.
pytestmark = pytest.mark.serial


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


def quick_app(db_url: str, tmp_path: Path, **settings: Any) -> Pressroom:
    app = make_app(db_url, tmp_path, **settings)
    app.runner.pause = lambda _seconds: None  # undo retries without waiting
    return app


def states(status: dict[str, Any]) -> dict[str, str]:
    return {d["uri"]: d["state"] for d in status["destinations"]}


def events(app: Pressroom, saga_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in app.reads.history(saga_id)["events"] if e["kind"] == kind]


def failed_with_live_page(
    app: Pressroom, corpus: Path, live: WebhookServer, bad: WebhookServer
) -> dict[str, Any]:
    """`live` publishes, `bad` refuses, and the undo of `live` fails: the saga waits for a person."""
    live.delete_mode = "refuse"
    saga = ready_saga(app, corpus, [f"webhook:{live.url}", f"webhook:{bad.url}"])
    app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
    return app.reads.status(saga["saga_id"])


@pytest.fixture
def meter() -> Iterator[InMemoryMetricReader]:
    memory = InMemoryMetricReader()
    assert setup.configure_metrics("pressroom-test", memory, force=True, set_global=False) is not None
    yield memory
    metrics.set_saga_state_counter(None)
    setup.shutdown()


def test_a_failed_undo_waits_for_a_person_and_retry_finishes_it(
    db_url: str, tmp_path: Path, corpus: Path, meter: InMemoryMetricReader
) -> None:
    app = quick_app(db_url, tmp_path)
    with WebhookServer() as live, WebhookServer("reject") as bad:
        status = failed_with_live_page(app, corpus, live, bad)
        assert counted(meter, names.METRIC_COMPENSATION_FAILED) == 1
        sid = status["saga_id"]
        assert status["state"] == "effect-unknown", status
        assert states(status) == {
            f"webhook:{live.url}": "compensation-failed",
            f"webhook:{bad.url}": "failed",
        }
        assert "could not be undone" in status["reason"] and live.url in status["reason"]
        assert len(live.applied) == 1, "the page is still live, and the saga says so"
        deletes = [r for r in live.received if r.method == "DELETE"]
        assert len(deletes) == 3, "a definite failure of the undo is retried, a bounded number of times"
        assert [e["status"] for e in events(app, sid, "transition")][-1] == "effect-unknown"

        live.delete_mode = "normal"
        again = app.reviews.retry(sid, actor="olga")
        assert again["retried"] == "undo" and again["state"] == "failed", again
        assert states(again) == {f"webhook:{live.url}": "compensated", f"webhook:{bad.url}": "failed"}
        assert live.applied == {} and bad.apply_count == 0
        reconciled = [e for e in events(app, sid, "transition") if e["detail"].get("event") == "reconciled"]
        assert reconciled and "undo retried by olga" in reconciled[-1]["detail"]["reason"]


def test_an_undo_that_hangs_past_the_timeout_is_not_called_done(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = quick_app(db_url, tmp_path)
    with WebhookServer(stall_seconds=3.0) as live, WebhookServer("reject") as bad:
        live.delete_mode = "stall"  # deletes, then answers after the 0.5 s timeout
        saga = ready_saga(app, corpus, [f"webhook:{live.url}", f"webhook:{bad.url}"])
        app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        status = app.reads.status(saga["saga_id"])
        assert status["state"] == "effect-unknown", status
        assert states(status)[f"webhook:{live.url}"] == "compensation-failed"
        assert len([r for r in live.received if r.method == "DELETE"]) == 1, (
            "a maybe-applied undo is not retried"
        )
        live.delete_mode = "normal"
        done = app.reviews.retry(saga["saga_id"], actor="olga")  # the DELETE now answers 404: undone
        assert done["state"] == "failed" and states(done)[f"webhook:{live.url}"] == "compensated"


def test_a_person_may_confirm_that_the_effect_stays(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = quick_app(db_url, tmp_path)
    with WebhookServer() as live, WebhookServer("reject") as bad:
        sid = failed_with_live_page(app, corpus, live, bad)["saga_id"]
        kept = app.reviews.reconcile(
            sid,
            destination=f"webhook:{live.url}",
            outcome="confirmed",
            actor="olga",
            reason="legal wants it up",
        )
        assert kept["state"] == "failed" and states(kept)[f"webhook:{live.url}"] == "kept"
        assert len(live.applied) == 1
        # The kept page stays when the saga is retried: nothing is posted to it again.
        posts = len([r for r in live.received if r.method == "POST"])
        bad.set_mode("normal")
        retried = app.reviews.retry(sid, actor="olga")
        assert retried["state"] == "succeeded", retried
        assert len([r for r in live.received if r.method == "POST"]) == posts
        assert bad.apply_count == 1


def test_retry_of_a_failed_saga_publishes_what_is_not_live_with_the_same_keys(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = quick_app(db_url, tmp_path)
    site = tmp_path / "site"
    with WebhookServer("reject") as hook:
        saga = ready_saga(app, corpus, [f"site:{site}", f"webhook:{hook.url}"])
        sid = saga["saga_id"]
        first = app.reviews.approve(sid, version=saga["version"], actor="erin")
        failed = app.reads.status(sid)
        assert failed["state"] == "failed" and not list(site.glob("*.md"))
        keys = {d["uri"]: d["idempotency_key"] for d in failed["destinations"]}
        hook.set_mode("normal")
        done = app.reviews.retry(sid, actor="olga")
        assert done["retried"] == "execution" and done["state"] == "succeeded", done
        assert {d["uri"]: d["idempotency_key"] for d in done["destinations"]} == keys
        assert hook.apply_count == 1 and list(hook.applied) == [keys[f"webhook:{hook.url}"]]
        assert len(list(site.glob("*.md"))) == 1, "one live page"
        assert first["approval_id"], "the retry ran under the approval the execution consumed"
        retried = [e for e in events(app, sid, "transition") if e["detail"].get("event") == "retried"]
        assert retried and retried[0]["actor"] == "olga"
        with pytest.raises(IllegalTransition):
            app.reviews.retry(sid, actor="olga")  # succeeded: nothing to retry


def test_retry_is_refused_where_it_has_no_meaning(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = quick_app(db_url, tmp_path)
    saga = ready_saga(app, corpus, [f"site:{tmp_path / 'site'}"])
    with pytest.raises(IllegalTransition):
        app.reviews.retry(saga["saga_id"], actor="olga")  # ready-for-review
    with WebhookServer(stall_seconds=2.0, status=False) as hook:
        hook.set_mode("stall")  # applied, no answer in time, and no status to ask: uncertain
        other = ready_saga(app, corpus, [f"webhook:{hook.url}"])
        app.reviews.approve(other["saga_id"], version=other["version"], actor="erin")
        assert app.reads.status(other["saga_id"])["state"] == "effect-unknown"
        with pytest.raises(Refused, match="reconcile it"):
            app.reviews.retry(other["saga_id"], actor="olga")  # an uncertain publish is never retried
        assert hook.apply_count == 1


def test_cancel_while_executing_stops_and_undoes(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = quick_app(db_url, tmp_path, destination_timeout=10.0)
    with WebhookServer(stall_seconds=2.0) as slow:
        slow.set_mode("stall")  # applies, then answers after 2 s: slow, within the timeout
        saga = ready_saga(app, corpus, [f"webhook:{slow.url}"])
        sid = saga["saga_id"]
        worker = threading.Thread(
            target=app.reviews.approve, args=(sid,), kwargs={"version": saga["version"], "actor": "erin"}
        )
        worker.start()
        deadline = time.monotonic() + 30
        while not slow.received and time.monotonic() < deadline:
            time.sleep(0.02)
        assert slow.received, "the publish reached the slow destination"
        asked = app.reviews.cancel(sid, actor="olga")
        assert asked["cancel"] == "requested" and asked["state"] == "executing"
        assert asked["cancel_requested_by"] == "olga"
        worker.join(timeout=60)
        final = app.reads.status(sid)
        assert final["state"] == "cancelled", final
        assert slow.applied == {}, "what was published is undone"
        assert [r.method for r in slow.received] == ["POST", "DELETE"]
        kinds = [(e["kind"], e["status"]) for e in app.reads.history(sid)["events"]]
        assert ("saga", "cancel_requested") in kinds
        with pytest.raises(IllegalTransition):
            app.reviews.cancel(sid, actor="olga")


def test_fork_starts_a_new_saga_at_review_with_the_same_bytes(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = quick_app(db_url, tmp_path)
    site = tmp_path / "site"
    saga = ready_saga(app, corpus, [f"site:{site}"])
    forked = app.reviews.fork(saga["saga_id"], version=1, actor="olga")
    fid = forked["saga_id"]
    assert fid != saga["saga_id"] and forked["state"] == "ready-for-review"
    assert forked["version"] == 1 and forked["version_digest"] == saga["version_digest"]
    assert forked["forked_from"] == {"saga_id": saga["saga_id"], "version": 1}
    assert app.reads.show(fid)["markdown"] == app.reads.show(saga["saga_id"])["markdown"]
    with pytest.raises(SelfApproval):
        app.reviews.approve(fid, version=1, actor="olga")  # who forked it submitted it
    done = app.reviews.approve(fid, version=1, actor="erin")
    assert app.reads.status(fid)["state"] == "succeeded" and done["approval_id"]
    assert [e["status"] for e in events(app, saga["saga_id"], "saga")][-1] == "forked"
    with pytest.raises(NotFound):
        app.reviews.fork(saga["saga_id"], version=9, actor="olga")

"""A publish that finds its destination at its limit gives its worker thread back.

With `PRESSROOM_DESTINATION_CONCURRENCY=1`, while one saga's call to a webhook
is in flight another saga's delivery for that webhook ends `parked` at once:
its lease is given back without counting an attempt (a claim made inside the
final transaction is rolled back), a `deferred` event says
why, and the work is sent again when the call in flight ends. Destinations of
the parked saga that had a free turn were published meanwhile. Should the
process die before the wake-up, the sweeper sends the work once its lease runs
out. Each key has exactly one effect throughout, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import update
from sqlmodel import Session, col, select

from orchestrator.bootstrap import sweep_leases
from orchestrator.core.routing import PUBLISH
from orchestrator.pressroom import Pressroom
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import WorkRow, new_id, utcnow
from outbox.messages import Envelope
from outbox.writer import envelope_of
from telemetry import names, setup
from tests.integration.helpers import make_app, ready_saga
from tests.support.metric_points import counted
from tests.support.webhook_server import WebhookServer


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


def _approved(
    db_url: str, tmp_path: Path, corpus: Path, *destinations: list[str]
) -> tuple[Pressroom, list[str]]:
    """Sagas approved by a publisher app whose messages stay in the outbox (the test delivers them)."""
    inline = make_app(db_url, tmp_path)
    ids = [ready_saga(inline, corpus, dests)["saga_id"] for dests in destinations]
    inline.close()
    app = make_app(
        db_url, tmp_path, broker_url="none://", destination_timeout=30.0, destination_concurrency=1
    )
    for sid in ids:
        app.reviews.approve(sid, version=1, actor="erin")
    return app, ids


def _publish_messages(app: Pressroom, saga_id: str) -> list[Envelope]:
    with Session(app.engine) as s:
        rows = s.exec(
            select(OutboxRow)
            .where(OutboxRow.saga_id == saga_id, OutboxRow.task == PUBLISH)
            .order_by(col(OutboxRow.created_at))
        ).all()
        return [envelope_of(r) for r in rows]


def _work(app: Pressroom, saga_id: str) -> WorkRow:
    with Session(app.engine) as s:
        return s.exec(select(WorkRow).where(WorkRow.saga_id == saga_id, WorkRow.task == PUBLISH)).one()


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def _first_in_flight(
    app: Pressroom, hook: WebhookServer, saga_id: str
) -> tuple[threading.Thread, dict[str, str]]:
    """Deliver `saga_id`'s publish in a thread and return once its POST is at the (stalling) webhook."""
    outcome: dict[str, str] = {}
    (env,) = _publish_messages(app, saga_id)
    first = threading.Thread(target=lambda: outcome.update(first=app.consumer.handle(env)))
    first.start()
    _until(lambda: hook.posts >= 1, "the first saga's POST reached the webhook")
    return first, outcome


@contextmanager
def _second_parked_behind_first(
    db_url: str, tmp_path: Path, corpus: Path
) -> Iterator[tuple[WebhookServer, Pressroom, str, threading.Thread]]:
    """Two sagas on one stalled webhook: the first's call in flight; the second saga's id."""
    with WebhookServer("stall", stall_seconds=60.0) as hook:
        dest = f"webhook:{hook.url}"
        app, (a, b) = _approved(db_url, tmp_path, corpus, [dest], [dest])
        first, _ = _first_in_flight(app, hook, a)
        try:
            yield hook, app, b, first
        finally:
            hook.release()
            first.join(timeout=60)
            app.close()


@pytest.fixture
def meter() -> Iterator[InMemoryMetricReader]:
    memory = InMemoryMetricReader()
    assert setup.configure_metrics("pressroom-test", memory, force=True, set_global=False) is not None
    yield memory
    setup.shutdown()


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    exporter = setup.install_in_memory()
    yield exporter
    setup.shutdown()


def test_a_publish_at_the_limit_parks_and_runs_when_the_call_in_flight_ends(
    db_url: str, tmp_path: Path, corpus: Path, meter: InMemoryMetricReader, memory: InMemorySpanExporter
) -> None:
    with WebhookServer("stall", stall_seconds=60.0) as hook:
        site = tmp_path / "site"
        dest = f"webhook:{hook.url}"
        app, (a, b) = _approved(db_url, tmp_path, corpus, [dest], [f"site:{site}", dest])
        first, outcome = _first_in_flight(app, hook, a)
        before = _work(app, b).attempts

        (delivery,) = _publish_messages(app, b)
        assert app.consumer.handle(delivery) == "parked", "the call in flight holds the webhook's only turn"

        assert len(list(site.glob("*.md"))) == 1, "the destination with a free turn was published meanwhile"
        work = _work(app, b)
        assert work.holder is None and work.done_at is None, "the lease is given back, the work still open"
        assert work.attempts == before, "parking is not a failed attempt"
        assert hook.posts == 1, "the parked saga never called the webhook"
        assert _publish_messages(app, b) == [delivery], "not sent again while the call is in flight"
        events = app.reads.history(b)["events"]
        deferred = [e for e in events if e["kind"] == "message" and e["status"] == "deferred"]
        assert len(deferred) == 1 and f"webhook:{hook.url}" in deferred[0]["detail"]["reason"]
        assert app.runner.limits.waiting(f"webhook:{hook.url}") == 1
        assert counted(meter, "pressroom.destination.waits") == 1
        delivery_spans = [
            span
            for span in memory.get_finished_spans()
            if span.attributes and span.attributes.get(names.ATTR_OUTCOME) == "parked"
        ]
        assert len(delivery_spans) == 1, "the parked delivery's span says so"
        (event,) = [e for e in delivery_spans[0].events if e.name == "parked"]
        assert event.attributes is not None and list(event.attributes[names.ATTR_DESTINATION]) == [dest]

        hook.release()
        first.join(timeout=60)
        assert outcome == {"first": "applied"}
        assert app.reads.status(a)["state"] == "succeeded"
        again = _publish_messages(app, b)
        assert len(again) == 2, "the call's end sent the parked work again"
        assert app.runner.limits.waiting(f"webhook:{hook.url}") == 0

        assert app.consumer.handle(again[1]) == "applied"
        assert app.reads.status(b)["state"] == "succeeded"
        assert hook.apply_count == 2 and hook.posts == 2, "one effect per key"
        assert len(list(site.glob("*.md"))) == 1
        assert app.consumer.handle(delivery) in ("duplicate", "lease-held"), "the parked copy is spent"
        app.close()


def test_parked_work_whose_wake_up_never_comes_is_sent_by_the_sweeper(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    with _second_parked_behind_first(db_url, tmp_path, corpus) as (hook, app, b, first):
        (delivery,) = _publish_messages(app, b)
        assert app.consumer.handle(delivery) == "parked"
        # The process "dies" before the call ends, and its wake-ups with it.
        app.runner.limits._waiting.clear()
        hook.release()
        first.join(timeout=60)
        assert len(_publish_messages(app, b)) == 1, "no wake-up was left to send it"

        with app.engine.begin() as conn:
            conn.execute(
                update(WorkRow)
                .where(col(WorkRow.saga_id) == b, col(WorkRow.task) == PUBLISH)
                .values(lease_until=utcnow() - timedelta(seconds=1))
            )
        assert sweep_leases(app) == 1
        resent = _publish_messages(app, b)
        assert len(resent) == 2
        assert app.consumer.handle(resent[1]) == "applied"
        assert app.reads.status(b)["state"] == "succeeded"
        assert hook.apply_count == 2


def test_a_saga_parked_many_times_is_not_given_up(db_url: str, tmp_path: Path, corpus: Path) -> None:
    with _second_parked_behind_first(db_url, tmp_path, corpus) as (hook, app, b, first):
        (delivery,) = _publish_messages(app, b)
        for _ in range(app.settings.max_attempts + 2):  # each a new copy, as a wake-up sends
            assert app.consumer.handle(delivery.model_copy(update={"message_id": new_id()})) == "parked"
        assert _work(app, b).attempts == 0
        hook.release()
        first.join(timeout=60)
        latest = _publish_messages(app, b)[-1]
        assert app.consumer.handle(latest) == "applied"
        assert app.reads.status(b)["state"] == "succeeded"


def test_a_parked_delivery_that_folded_its_lease_leaves_the_work_as_it_was(
    pg_url: str, tmp_path: Path, corpus: Path
) -> None:
    with _second_parked_behind_first(pg_url, tmp_path, corpus) as (hook, app, b, first):
        app.consumer.short_queues = frozenset({"publisher"})  # B's claim inside its final transaction
        before = _work(app, b)
        (delivery,) = _publish_messages(app, b)
        assert app.consumer.handle(delivery) == "parked"
        after = _work(app, b)
        assert (after.holder, after.attempts, after.lease_until) == (
            before.holder,
            before.attempts,
            before.lease_until,
        ), "the claim was rolled back"
        hook.release()
        first.join(timeout=60)
        app.consumer.short_queues = frozenset()
        resent = _publish_messages(app, b)
        assert len(resent) == 2
        assert app.consumer.handle(resent[1]) == "applied"
        assert app.reads.status(b)["state"] == "succeeded"

"""The whole pipeline as separate OS processes on PostgreSQL with Redis, and
again with RabbitMQ: relay and worker processes, driven through the CLI from
submit to succeeded."""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import base_env
from tests.support.processes import Processes, cli_json, saga_state, submit, wait_until


@pytest.fixture(params=["redis", "amqp"])
def broker_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("redis_url" if request.param == "redis" else "amqp_url"))


@pytest.fixture
def procs(tmp_path: Path, pg_url: str, broker_url: str):  # type: ignore[no-untyped-def]
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=broker_url,
        PRESSROOM_LEASE_SECONDS="5",
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
    )
    p = Processes(env, tmp_path)
    yield p
    p.stop_all()


def test_submit_to_succeeded_across_processes(procs: Processes, corpus: Path, tmp_path: Path) -> None:
    procs.relay()
    for queue in ("researcher", "writer", "reviewer", "publisher"):
        procs.worker(f"worker-{queue}", queue)
    site, repo = tmp_path / "site", tmp_path / "repo"
    env = procs.env
    sid = submit(env, corpus, f"site:{site}", f"git:{repo}", actor="dana")
    try:
        wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=90, what="ready-for-review")
        shown = cli_json(env, "show", sid)
        assert shown["citations"] and shown["review"]["verdict"] == "pass"
        approval = cli_json(env, "approve", sid, "--version", str(shown["version"]), "--as", "erin")
        assert approval["version_digest"] == shown["version_digest"]
        wait_until(lambda: saga_state(env, sid) == "succeeded", timeout=90, what="succeeded")
    except AssertionError:
        print(procs.logs())
        raise
    status = cli_json(env, "status", sid)
    receipts = {d["uri"]: d["receipt"] for d in status["destinations"]}
    page = Path(receipts[f"site:{site}"]["path"])
    assert hashlib.sha256(page.read_bytes()).hexdigest() == status["version_digest"]
    commit = receipts[f"git:{repo}"]["commit"]
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%H %(trailers:key=Pressroom-Idempotency-Key,valueonly)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert commit in log and status["destinations"][1]["idempotency_key"] in log
    count = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--count", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert count == "1", "one commit per publish"


def test_rabbitmq_queues_are_durable_and_messages_persistent(amqp_url: str) -> None:
    """A RabbitMQ restart keeps queued work: the role queues are durable (declaring
    one as transient is refused) and the app publishes with delivery mode 2."""
    import amqp as pyamqp
    from kombu import Connection

    from orchestrator.celery_app import make_celery

    celery = make_celery(amqp_url)
    assert celery.conf.task_default_delivery_mode == "persistent"
    assert all(q.durable and q.exchange.durable for q in celery.conf.task_queues)
    with Connection(amqp_url) as conn:
        channel = conn.channel()
        for q in celery.conf.task_queues:
            q.bind(channel).declare()
        for q in celery.conf.task_queues:
            probe = conn.channel()
            with pytest.raises(pyamqp.exceptions.PreconditionFailed):
                probe.queue_declare(queue=q.name, durable=False)
        # What the app sends is marked persistent on the wire.
        probe_queue = f"pressroom-persistence-probe-{uuid.uuid4().hex[:8]}"
        channel.queue_declare(queue=probe_queue, durable=True, auto_delete=False)
        try:
            celery.send_task(
                "pressroom.researcher.research",
                args=[{}],
                queue=probe_queue,
                routing_key=probe_queue,
                exchange="",
                retry=False,
            )
            got = wait_until(
                lambda: channel.basic_get(probe_queue, no_ack=True), timeout=10, what="the probe message"
            )
            assert got.properties["delivery_mode"] == 2
        finally:
            channel.queue_delete(probe_queue)

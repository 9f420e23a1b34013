"""Recovery never waits on the broker: worker SIGKILL mid-task, a Redis
restart with messages queued, a relay killed between commit and send, and
the publisher killed mid-publish. All as real processes on Redis + PostgreSQL.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from orchestrator.store.db import make_engine
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import WorkRow
from tests.conftest import base_env, free_port
from tests.support.processes import Processes, cli_json, redis_server, saga_state, submit, wait_until
from tests.support.webhook_server import WebhookServer

LEASE = "3"


def _env(pg_url: str, broker: str, **extra: str) -> dict[str, str]:
    return base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=broker,
        PRESSROOM_LEASE_SECONDS=LEASE,
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
        **extra,
    )


@pytest.fixture
def procs(tmp_path: Path):  # type: ignore[no-untyped-def]
    holder: list[Processes] = []

    def make(env: dict[str, str]) -> Processes:
        p = Processes(env, tmp_path)
        holder.append(p)
        return p

    yield make
    for p in holder:
        p.stop_all()


def big_corpus(root: Path, files: int = 1500) -> Path:
    """Enough text that research takes a noticeable moment (so a kill lands mid-task)."""
    root.mkdir()
    for i in range(files):
        (root / f"note-{i:04d}.md").write_text(
            f"# Note {i}\n\nThe library network opened branch number {i} in a renovated building. "
            f"Volunteers catalogued {i * 7} books for the reading room that year.\n\n"
            + "Local history records mention the library network often. "
            * 20,
            encoding="utf-8",
        )
    return root


def _work(pg_url: str, saga_id: str, task_suffix: str) -> list[WorkRow]:
    engine = make_engine(pg_url)
    with Session(engine) as s:
        rows = s.exec(
            select(WorkRow).where(WorkRow.saga_id == saga_id).order_by(col(WorkRow.created_at))
        ).all()
        return [r for r in rows if r.task.endswith(task_suffix)]


def test_worker_sigkilled_mid_task_is_recovered_by_lease(
    procs, pg_url: str, redis_url: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # A lease long enough for the second worker to index the 1,500 files once, even on a busy
    # machine: the one recovery this test counts is the sweeper's after the kill.
    env = {**_env(pg_url, redis_url), "PRESSROOM_LEASE_SECONDS": "12"}
    p = procs(env)
    p.relay()
    worker = p.worker("worker-1")
    corpus = big_corpus(tmp_path / "big")
    # The submitting process keeps its corpus index elsewhere (another host, say): the
    # worker's research builds its own index of 1,500 files, so the kill lands mid-task.
    submitter = {**env, "PRESSROOM_INDEX_DIR": str(tmp_path / "submitter-index")}
    sid = submit(submitter, corpus, f"site:{tmp_path / 'site'}", brief="library network branch volunteers")
    # Kill the worker as soon as it holds the research lease.
    wait_until(
        lambda: any(w.holder for w in _work(pg_url, sid, "research")),
        timeout=60,
        every=0.05,
        what="research to start",
    )
    worker.kill(signal.SIGKILL)
    assert saga_state(env, sid) == "preparing"
    p.worker("worker-2")
    try:
        wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=120, what="ready-for-review")
    except AssertionError:
        print(p.logs())
        raise
    research = _work(pg_url, sid, "research")
    assert research[0].attempts == 2, "the second attempt came from the lease sweeper, not the broker"


def test_redis_restart_with_messages_queued_loses_no_work(
    procs, pg_url: str, tmp_path: Path, corpus: Path
) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    env = _env(pg_url, broker)
    with redis_server(port, tmp_path):
        sid = submit(env, corpus, f"site:{tmp_path / 'site'}")
        import redis

        assert redis.Redis(port=port).llen("researcher") == 1, "the research message waits in Redis"
    # Redis keeps nothing on disk: the restarted server has lost the queued message.
    with redis_server(port, tmp_path):
        assert redis.Redis(port=port).llen("researcher") == 0
        p = procs(env)
        p.relay()
        p.worker()
        try:
            wait_until(
                lambda: saga_state(env, sid) == "ready-for-review", timeout=120, what="ready-for-review"
            )
        except AssertionError:
            print(p.logs())
            raise


def test_relay_killed_between_commit_and_send_loses_no_message(
    procs, pg_url: str, tmp_path: Path, corpus: Path
) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    env = _env(pg_url, broker)
    # The broker is down: the commit succeeds, the send after it fails; the row waits.
    sid = submit(env, corpus, f"site:{tmp_path / 'site'}")
    engine = make_engine(pg_url)

    def unsent() -> set[str]:
        with Session(engine) as s:
            return set(s.exec(select(OutboxRow.id).where(col(OutboxRow.sent_at).is_(None))).all())

    first = unsent()
    assert len(first) == 1
    p = procs(env)
    relay = p.relay("relay-1")
    wait_until(
        lambda: "broker unavailable" in relay.output() or relay.popen.poll() is not None,
        timeout=30,
        what="the relay to meet the outage",
    )
    relay.kill(signal.SIGKILL)
    # (the lease sweeper may have queued a second copy meanwhile; consumers dedupe)
    assert first <= unsent(), "a dead relay with a dead broker lost nothing"
    with redis_server(port, tmp_path):
        p.relay("relay-2")
        p.worker()
        try:
            wait_until(
                lambda: saga_state(env, sid) == "ready-for-review", timeout=120, what="ready-for-review"
            )
        except AssertionError:
            print(p.logs())
            raise
    assert unsent() == set()


def test_publisher_sigkilled_mid_publish_gives_one_effect(
    procs, pg_url: str, redis_url: str, tmp_path: Path, corpus: Path
) -> None:  # type: ignore[no-untyped-def]
    # The killed call's claim on its key lasts the destination timeout + 5 s;
    # until then the restarted publisher defers, then asks the status.
    env = _env(pg_url, redis_url, PRESSROOM_DESTINATION_TIMEOUT="4", PRESSROOM_MAX_ATTEMPTS="10")
    p = procs(env)
    p.relay()
    p.worker("roles", "researcher,writer,reviewer")
    publisher = p.worker("publisher-1", "publisher")
    with WebhookServer("stall", stall_seconds=15) as hook:
        sid = submit(env, corpus, f"webhook:{hook.url}")
        wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=90, what="ready-for-review")
        cli_json(env, "approve", sid, "--version", "1", "--as", "erin")
        wait_until(lambda: hook.posts == 1, timeout=60, what="the publish request to arrive")
        os.killpg(publisher.popen.pid, signal.SIGKILL)  # the request was applied; no answer was recorded
        publisher.popen.wait(timeout=10)
        hook.set_mode("normal")
        p.worker("publisher-2", "publisher")
        try:
            wait_until(
                lambda: saga_state(env, sid) in ("succeeded", "effect-unknown"), timeout=90, what="an outcome"
            )
        except AssertionError:
            print(p.logs())
            raise
        assert hook.apply_count == 1, "exactly one effect"
        assert saga_state(env, sid) == "succeeded", "the status query resolved the pending intent"
        assert hook.posts == 1, "the restart asked the status, it did not publish again"

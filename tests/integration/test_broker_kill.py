"""Redis killed (-9) under the README's topology while every worker holds an
unacknowledged message: each worker reconnects and stays up, and every saga
completes.

The processes are the shipped ones: `pressroom relay` and one `pressroom worker
--queues Q` per queue on its default threads pool (4 threads for a role queue,
16 for the publisher), on PostgreSQL and a redis-server of the test's own on a
free port, which the test kills with SIGKILL and starts again on the same port
with nothing kept (the queues and kombu's unacked index are gone).

To have every worker hold a message when Redis dies, one saga's next message
waits in each queue while that queue has no worker (research, draft, review,
publish), and the test holds a SHARE lock on the `work` table: a started worker
receives its message and blocks on its lease, unacknowledged. Redis is killed,
started again, and the lock is let go. Work whose message was lost with Redis
comes back through its lease (the relay resends it) and is applied once (inbox).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from orchestrator.core.routing import QUEUES
from tests.conftest import base_env, free_port
from tests.integration.test_broker_restart import start_redis
from tests.support.processes import PRESSROOM, Proc, Processes, cli_json, saga_state, submit, wait_until

REDIS_DOWN_SECONDS = 2.0
# Long enough that no lease runs out while the test stages its sagas.
LEASE_SECONDS = 30
LEFT = "unacknowledged message(s) left to"  # the worker's warning when it could not restore them


@pytest.fixture
def topology(tmp_path: Path, pg_url: str) -> Iterator[tuple[Processes, dict[str, Any]]]:
    port = free_port()
    server = {"proc": start_redis(port, tmp_path), "port": port}
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=f"redis://127.0.0.1:{port}/0",
        PRESSROOM_LEASE_SECONDS=str(LEASE_SECONDS),
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
    )
    procs = Processes(env, tmp_path)
    try:
        yield procs, server
    finally:
        procs.stop_all()
        server["proc"].kill()
        server["proc"].wait(timeout=10)


def _worker(procs: Processes, queue: str, n: int = 0) -> Proc:
    # No --pool and no --concurrency: the shipped default, a threads pool.
    return procs.start(f"worker-{queue}-{n}", PRESSROOM, "worker", "--queues", queue, "--loglevel", "INFO")


def _ready(worker: Proc, queue: str) -> None:
    wait_until(lambda: " ready." in worker.output(), timeout=90, what=f"the {queue} worker")


def test_every_worker_survives_a_redis_kill_while_holding_a_message(
    topology: tuple[Processes, dict[str, Any]], tmp_path: Path, corpus: Path
) -> None:
    procs, server = topology
    env = procs.env
    queued = redis.Redis(port=server["port"])

    def waiting_in(queue: str) -> None:
        wait_until(lambda: queued.llen(queue) >= 1, timeout=120, what=f"a message waiting in {queue}")

    def saga(n: int) -> str:
        return submit(env, corpus, f"site:{tmp_path / f'site{n}'}", actor="dana")

    procs.relay()
    workers = {q: _worker(procs, q) for q in ("researcher", "writer", "reviewer")}
    for queue, worker in workers.items():
        _ready(worker, queue)
    engine = create_engine(env["PRESSROOM_DATABASE_URL"], poolclass=NullPool)
    lock = engine.connect()
    try:
        # One saga's next message waits in each queue, whose worker is stopped (or not started).
        to_publish = saga(0)
        wait_until(lambda: saga_state(env, to_publish) == "ready-for-review", timeout=120, what="saga 0")
        workers.pop("reviewer").stop()
        to_review = saga(1)
        waiting_in("reviewer")
        workers.pop("writer").stop()
        to_write = saga(2)
        waiting_in("writer")
        workers.pop("researcher").stop()
        to_research = saga(3)
        waiting_in("researcher")
        cli_json(env, "approve", to_publish, "--version", "1", "--as", "erin")
        waiting_in("publisher")
        sagas = [to_publish, to_review, to_write, to_research]

        # Leases wait on the lock: each worker takes its message and holds it, unacknowledged.
        lock.execute(text("LOCK TABLE work IN SHARE MODE"))
        workers = {q: _worker(procs, q, 1) for q in QUEUES}
        for queue, worker in workers.items():
            wait_until(
                lambda w=worker: "] received" in w.output(), timeout=90, what=f"the {queue} worker's message"
            )
        assert all(queued.llen(q) == 0 for q in QUEUES)

        server["proc"].send_signal(signal.SIGKILL)
        server["proc"].wait(timeout=10)
        time.sleep(REDIS_DOWN_SECONDS)
        server["proc"] = start_redis(server["port"], tmp_path)
        lock.rollback()

        approved = {to_publish}

        def all_succeeded() -> bool:
            dead = {q: w.popen.poll() for q, w in workers.items() if w.popen.poll() is not None}
            assert not dead, f"workers exited after the Redis kill: {dead}"
            for sid in sagas:
                if sid not in approved and saga_state(env, sid) == "ready-for-review":
                    cli_json(env, "approve", sid, "--version", "1", "--as", "erin")
                    approved.add(sid)
            return all(saga_state(env, sid) == "succeeded" for sid in sagas)

        wait_until(all_succeeded, timeout=240, every=0.5, what="every saga to succeed")
    except AssertionError:
        print(procs.logs())
        raise
    finally:
        lock.close()
        engine.dispose()

    for queue, worker in workers.items():
        text_ = worker.output()
        assert worker.popen.poll() is None, f"{queue} worker exited:\n{text_[-3000:]}"
        assert "Unrecoverable error" not in text_, text_[-3000:]
        # It held a message when the connection dropped, and connected again in the same process.
        assert LEFT in text_, text_[-3000:]
        assert text_.count("Connected to redis://") >= 2, text_[-3000:]

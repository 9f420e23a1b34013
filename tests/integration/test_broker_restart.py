"""A worker whose Redis is killed under it carries on once Redis is back; one
whose Redis stays away past its retries exits non-zero so that a supervisor
restarts it; never a silent exit 0.

The redis-server is the test's own, on a free port. The README's topology,
with every worker holding a message at the kill, is `test_broker_kill.py`.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import base_env, free_port
from tests.support.processes import PRESSROOM, Processes, saga_state, submit, wait_until


def start_redis(port: int, workdir: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    def up() -> bool:
        try:
            return bool(redis.Redis(port=port, socket_connect_timeout=0.5).ping())
        except Exception:
            return False

    wait_until(up, timeout=15, what=f"redis on {port}")
    return proc


@pytest.fixture
def setup(tmp_path: Path, pg_url: str):  # type: ignore[no-untyped-def]
    port = free_port()
    redis_proc = start_redis(port, tmp_path)
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=f"redis://127.0.0.1:{port}/0",
        PRESSROOM_LEASE_SECONDS="5",
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
    )
    procs = Processes(env, tmp_path)
    state = {"redis": redis_proc, "port": port}
    yield procs, state
    procs.stop_all()
    state["redis"].kill()
    state["redis"].wait(timeout=10)


def test_worker_carries_on_when_redis_dies(setup, corpus: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    procs, state = setup
    env = procs.env
    procs.relay()
    worker = procs.worker("worker")
    first = submit(env, corpus, f"site:{tmp_path / 'site0'}", actor="dana")
    try:
        wait_until(lambda: saga_state(env, first) == "ready-for-review", timeout=90, what="first saga")
        for round_ in range(1, 4):
            state["redis"].kill()  # SIGKILL: connections drop, queues are gone
            state["redis"].wait(timeout=10)
            time.sleep(1.0)  # the worker meets the lost connection while Redis is away
            state["redis"] = start_redis(state["port"], tmp_path)
            sid = submit(env, corpus, f"site:{tmp_path / f'site{round_}'}", actor="dana")

            def progressed(saga_id: str = sid) -> bool:
                code = worker.popen.poll()
                assert code is None, f"worker exited with status {code} after losing Redis"
                return saga_state(env, saga_id) == "ready-for-review"

            wait_until(progressed, timeout=120, what=f"saga after Redis restart {round_}")
    except AssertionError:
        print(procs.logs())
        raise
    assert worker.output().count("Connected to redis://") >= 4, worker.output()[-3000:]


def test_a_worker_whose_redis_stays_away_gives_up_after_its_retries(setup) -> None:  # type: ignore[no-untyped-def]
    # Two retries: kombu waits 2 s, then 4 s, tries once more, and the worker exits 1.
    procs, state = setup
    env = {**procs.env, "PRESSROOM_BROKER_MAX_RETRIES": "2"}
    worker = procs.start(
        "worker-giveup", PRESSROOM, "worker", "--queues", "researcher", "--loglevel", "INFO", env=env
    )
    wait_until(lambda: " ready." in worker.output(), timeout=60, what="worker ready")
    state["redis"].kill()
    state["redis"].wait(timeout=10)
    lost = time.monotonic()
    code = worker.popen.wait(timeout=90)
    waited = time.monotonic() - lost
    out = worker.output()
    assert code == 1, out[-3000:]
    assert "Trying again in 2.00 seconds... (1/2)" in out, out[-3000:]
    assert "Trying again in 4.00 seconds... (2/2)" in out, out[-3000:]
    assert "(3/2)" not in out, out[-3000:]
    assert waited >= 6.0, waited


def test_a_worker_that_cannot_go_on_exits_non_zero(tmp_path: Path, pg_url: str) -> None:
    # No broker on this port, one retry: the worker gives up on an unrecoverable
    # error, and its exit status says so (Celery's own entry point would say 0).
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=f"redis://127.0.0.1:{free_port()}/0",
        PRESSROOM_BROKER_MAX_RETRIES="1",
    )
    procs = Processes(env, tmp_path)
    worker = procs.worker("worker-nobroker", "researcher")
    try:
        code = worker.popen.wait(timeout=90)
    finally:
        procs.stop_all()
    assert code == 1, worker.output()[-2000:]
    assert "Unrecoverable error" in worker.output()


def test_a_stopped_worker_exits_zero(setup) -> None:  # type: ignore[no-untyped-def]
    procs, _state = setup
    worker = procs.worker("worker-stop", "researcher")
    wait_until(lambda: "ready." in worker.output(), timeout=60, what="worker ready")
    worker.kill(signal.SIGTERM)
    assert worker.popen.returncode == 0, worker.output()[-2000:]

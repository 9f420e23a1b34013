"""`pressroom worker` without `--queues`: the role queues in one worker process
and the publisher in a worker process of its own on a threads pool, on
PostgreSQL with Redis; the two stop together and a dead publisher worker
makes the parent exit non-zero for its supervisor."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from telemetry.render import read_span_file
from tests.conftest import base_env
from tests.support.processes import PRESSROOM, Processes, cli_json, saga_state, submit, wait_until
from tests.support.webhook_server import WebhookServer


@pytest.fixture
def traced(tmp_path: Path, pg_url: str, redis_url: str):  # type: ignore[no-untyped-def]
    spans_file = tmp_path / "spans.jsonl"
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS="5",
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
        OTEL_TRACES_EXPORTER="file",
        PRESSROOM_TRACE_FILE=str(spans_file),
    )
    p = Processes(env, tmp_path)
    yield p, spans_file
    p.stop_all()


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def _publisher_child(pid: int) -> int | None:
    for child in _children(pid):
        args = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        if b"worker" in args and b"publisher" in args:
            return child
    return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_default_worker_runs_the_publisher_in_its_own_threads_pool_process(
    traced, tmp_path: Path, corpus: Path
) -> None:  # type: ignore[no-untyped-def]
    procs, spans_file = traced
    env = procs.env
    procs.relay()
    worker = procs.start("worker", PRESSROOM, "worker", "--pool", "solo", "--loglevel", "INFO")
    child = wait_until(
        lambda: _publisher_child(worker.popen.pid), timeout=60, what="the publisher worker process"
    )

    sid = submit(env, corpus, f"site:{tmp_path / 'site'}")
    wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=120, what="ready-for-review")
    cli_json(env, "approve", sid, "--version", "1", "--as", "erin")
    wait_until(lambda: saga_state(env, sid) == "succeeded", timeout=120, what="succeeded")

    # SIGTERM to the parent alone: it stops its publisher worker too, and both exit 0.
    worker.popen.send_signal(signal.SIGTERM)
    assert worker.popen.wait(timeout=120) == 0, worker.output()[-3000:]
    wait_until(lambda: not _alive(child), timeout=60, what="the publisher worker to exit")
    procs.stop_all()  # flush the relay's spans

    spans: list[dict[str, Any]] = read_span_file(spans_file)
    mine = [s for s in spans if s["attributes"].get("pressroom.saga.id") == sid]
    by_service: dict[str, set[str]] = {}
    for s in mine:
        by_service.setdefault(s["service"], set()).add(s["name"])
    assert "pressroom-worker-researcher-writer-reviewer" in by_service, sorted(by_service)
    assert "pressroom-worker-publisher" in by_service, sorted(by_service)
    publisher_spans = " ".join(sorted(by_service["pressroom-worker-publisher"]))
    assert "publisher" in publisher_spans, publisher_spans
    text = worker.output()
    assert "concurrency: 16 (thread)" in text, text[-3000:]
    assert "publisher: at most 8 calls in flight to one destination" in text, text[-3000:]
    assert "(solo)" in text, text[-3000:]


def test_a_dead_publisher_worker_stops_the_parent_with_a_failure(traced) -> None:  # type: ignore[no-untyped-def]
    procs, _ = traced
    worker = procs.start("worker", PRESSROOM, "worker", "--pool", "solo", "--loglevel", "INFO")
    child = wait_until(
        lambda: _publisher_child(worker.popen.pid), timeout=60, what="the publisher worker process"
    )
    wait_until(lambda: "pressroom-publisher@" in worker.output(), timeout=90, what="the publisher worker")
    os.kill(child, signal.SIGKILL)
    assert worker.popen.wait(timeout=120) != 0, worker.output()[-3000:]


def test_worker_refuses_a_pool_size_below_one(traced) -> None:  # type: ignore[no-untyped-def]
    procs, _ = traced
    done = subprocess.run(
        [PRESSROOM, "worker", "--queues", "publisher", "--concurrency", "0"],
        env=procs.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert done.stderr.strip().count("\n") == 0 and "--concurrency" in done.stderr, done.stderr


def test_by_default_the_role_queues_run_on_four_threads_and_sagas_finish(
    traced, tmp_path: Path, corpus: Path
) -> None:  # type: ignore[no-untyped-def]
    procs, _ = traced
    env = procs.env
    procs.relay()
    worker = procs.start("worker", PRESSROOM, "worker", "--loglevel", "INFO")
    wait_until(lambda: "pressroom-publisher@" in worker.output(), timeout=90, what="the publisher worker")
    # Several sagas at once, so the role threads run their work side by side.
    sagas = [submit(env, corpus, f"site:{tmp_path / f'site-{i}'}") for i in range(4)]
    for sid in sagas:
        wait_until(lambda s=sid: saga_state(env, s) == "ready-for-review", timeout=180, what="ready")
        cli_json(env, "approve", sid, "--version", "1", "--as", "erin")
    for sid in sagas:
        wait_until(lambda s=sid: saga_state(env, s) == "succeeded", timeout=180, what="succeeded")
    text = worker.output()
    assert "concurrency: 4 (thread)" in text, text[-3000:]
    assert "concurrency: 16 (thread)" in text, text[-3000:]


def test_sagas_waiting_for_a_slow_destination_do_not_hold_the_publishers_threads(
    tmp_path: Path, pg_url: str, redis_url: str, corpus: Path
) -> None:
    """A publisher of two threads, so one turn at a destination (half its pool, with
    PRESSROOM_DESTINATION_CONCURRENCY unset), and a stalled webhook: the other webhook
    sagas park instead of waiting on a thread, and a site-only saga approved after
    them is published while the webhook still holds its first POST."""
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS="120",  # longer than the stall: no lease runs out in this test
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_DESTINATION_TIMEOUT="90",
    )
    procs = Processes(env, tmp_path)
    with WebhookServer("stall", stall_seconds=90.0) as hook:
        try:
            procs.relay()
            procs.worker(queues="researcher,writer,reviewer")
            publisher = procs.start(
                "publisher", PRESSROOM, "worker", "--queues", "publisher", "--pool", "threads",
                "--concurrency", "2",
            )  # fmt: skip
            wait_until(lambda: "at most 1 call in flight" in publisher.output(), timeout=60, what="its limit")
            dest = f"webhook:{hook.url}"
            hooked = [submit(env, corpus, f"site:{tmp_path / f'hooked-{i}'}", dest) for i in range(3)]
            local = submit(env, corpus, f"site:{tmp_path / 'local'}")
            for sid in [*hooked, local]:
                wait_until(lambda s=sid: saga_state(env, s) == "ready-for-review", timeout=180, what="ready")
            for sid in hooked:
                cli_json(env, "approve", sid, "--version", "1", "--as", "erin")
            wait_until(lambda: hook.posts == 1, timeout=120, what="the first webhook POST")

            def two_parked() -> list[str] | None:
                parked = [s for s in hooked if _deferred(env, s)]
                return parked if len(parked) == 2 else None

            parked = wait_until(two_parked, timeout=120, what="the two other webhook sagas parked")
            cli_json(env, "approve", local, "--version", "1", "--as", "erin")
            wait_until(lambda: saga_state(env, local) == "succeeded", timeout=120, what="local published")
            assert hook.posts == 1, "published while the webhook still held its only turn"
            for sid in parked:
                assert saga_state(env, sid) == "executing"
                reason = _deferred(env, sid)[0]["detail"]["reason"]
                assert dest in reason and "PRESSROOM_DESTINATION_CONCURRENCY" in reason, reason

            hook.release()
            for sid in hooked:
                wait_until(lambda s=sid: saga_state(env, s) == "succeeded", timeout=180, what="succeeded")
            assert hook.apply_count == 3 and hook.posts == 3, "one effect per key, each sent once"
        finally:
            procs.stop_all()


def _deferred(env: dict[str, str], saga_id: str) -> list[dict[str, Any]]:
    events = cli_json(env, "history", saga_id)["events"]
    return [e for e in events if e["kind"] == "message" and e["status"] == "deferred"]

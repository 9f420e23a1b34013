"""Stopping a chaos run with SIGTERM stops what it started.

A run starts its own PostgreSQL, Redis and Pressroom processes; a soak runs for hours,
so an operator will stop one early. SIGTERM must leave nothing of it running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from chaos.soak import descendants

pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def _postgres_of(roots: set[Path]) -> list[int]:
    """PostgreSQL servers serving a data folder under one of `roots` (pg_ctl detaches them,
    so they are not the run's descendants)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(root).encode() in a for a in args for root in roots) and _alive(int(cmdline.parent.name)):
            found.append(int(cmdline.parent.name))
    return found


def _pg_roots() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("pressroom-pg-*"))


def test_sigterm_stops_the_cluster_the_run_started(tmp_path: Path) -> None:
    before = _pg_roots()
    argv = [sys.executable, "-m", "chaos", "--sagas", "3", "--direct", "--no-docs", "--out", str(tmp_path)]
    run = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started: list[int] = []
    ours: set[Path] = set()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and run.poll() is None:
            logs = list(tmp_path.glob("run-*/run.log"))
            if logs and "approve" in logs[0].read_text():
                break
            time.sleep(0.5)
        assert run.poll() is None, run.stderr.read() if run.stderr else ""
        started = descendants(run.pid)
        ours = _pg_roots() - before
        assert ours and _postgres_of(ours), "the run's PostgreSQL is not found"
        assert len(started) >= 6, started  # PostgreSQL, Redis, the relay, workers, serve
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in started):
            time.sleep(0.2)
        assert [p for p in started if _alive(p)] == []
        assert _postgres_of(ours) == []
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in started + _postgres_of(ours):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

"""The clock-skew fault: libfaketime's environment reaches a child's wall clock (not its
monotonic one), a worker's ready line gives the time it believes, and the nemesis restarts a
supervised stand-in worker skewed for the hold, then on the true clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import cast

import pytest

from chaos.cluster import Postgres, Redis, Supervisor
from chaos.destinations import Destinations
from chaos.faults import Fault
from chaos.nemesis import (
    FAKETIME,
    REGISTRY,
    SKEWED_SITE,
    STOP_GRACE,
    Handles,
    Nemesis,
    ready_clock,
    skewed,
)

needs_faketime = pytest.mark.skipif(not FAKETIME.exists(), reason=f"libfaketime not installed ({FAKETIME})")

# A stand-in for `pressroom worker`: Celery's ready line, with the time the process believes,
# then it waits for SIGTERM as a worker's warm shutdown does.
STAND_IN = """
import logging, signal, sys, time
logging.basicConfig(format="[%(asctime)s: %(levelname)s/MainProcess] %(message)s", level=logging.INFO)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
logging.info("pressroom-writer@vm ready.")
while True:
    time.sleep(1)
"""


def test_skewed_adds_libfaketime_to_the_environment() -> None:
    env = skewed({"PATH": "/bin", "LD_PRELOAD": "/lib/other.so", "PYTHONPATH": "/src"}, -3)
    assert env["PATH"] == "/bin"
    assert env["LD_PRELOAD"] == f"{FAKETIME} /lib/other.so"
    assert env["FAKETIME"] == "-3m" and skewed({}, 7)["FAKETIME"] == "+7m"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert env["PYTHONPATH"] == f"{SKEWED_SITE}{os.pathsep}/src"
    assert (SKEWED_SITE / "sitecustomize.py").is_file()
    assert skewed({}, 2)["LD_PRELOAD"] == str(FAKETIME) and skewed({}, 2)["PYTHONPATH"] == str(SKEWED_SITE)


@needs_faketime
@pytest.mark.parametrize("minutes", [7, -4])
def test_the_skew_reaches_the_childs_wall_clock_only(minutes: int) -> None:
    """...and the child's sleeps and timed waits still last what they should."""
    script = (
        "import json, threading, time\n"
        "t = time.monotonic(); time.sleep(0.2); threading.Event().wait(0.2)\n"
        "print(json.dumps([time.time(), time.monotonic(), time.monotonic() - t]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=skewed(dict(os.environ), minutes),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    wall, mono, took = json.loads(out.stdout)
    assert abs(wall - time.time() - minutes * 60) < 5
    assert abs(mono - time.monotonic()) < 5, "the monotonic clock stays true"
    assert 0.39 < took < 3


def test_the_ready_line_gives_the_workers_own_time() -> None:
    log = (
        "\n=== start 2 at 05:12:20 ===\n"
        " -------------- pressroom-writer@vm v5.7.0 (collider)\n"
        "[2026-12-04 05:19:21,250: WARNING/MainProcess] something else\n"
        "[2026-12-04 05:19:21,409: INFO/MainProcess] pressroom-writer@vm ready.\n"
        "[2026-12-04 05:20:00,000: INFO/MainProcess] pressroom-writer@vm ready.\n"
    )
    assert ready_clock(log) == datetime(2026, 12, 4, 5, 19, 21).timestamp() + 0.409
    assert ready_clock("[2026-12-04 05:19:21,409: INFO/MainProcess] connected to redis\n") is None
    assert ready_clock("") is None


@needs_faketime
def test_a_worker_runs_skewed_for_the_hold_then_on_the_true_clock(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKETIME")}
    sup = Supervisor(env, tmp_path, cwd=tmp_path)
    sup.add("worker-writer", "-c", STAND_IN, launcher=(sys.executable,))
    sup.start()
    deadline = time.monotonic() + 30
    while ready_clock(sup.log_of("worker-writer").read_text()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    handles = Handles(
        sup,
        cast(Redis, None),  # not touched by this kind
        cast(Postgres, None),
        cast(Destinations, None),
        lambda _line: None,
        extra={"faketime": str(FAKETIME)},
    )
    fault = Fault(0.0, "clock-skew", "worker-writer", 1.5, (("skew_minutes", 6),))
    again = Fault(0.2, "clock-skew", "worker-writer", 1.5, (("skew_minutes", -2),))
    n = Nemesis([fault, again], handles)
    try:
        began = time.time()
        n.start()
        deadline = time.monotonic() + 30
        while "unskewed_seen_s" not in (n.done[0] if n.done else {}) and time.monotonic() < deadline:
            time.sleep(0.1)
        entry = n.done[0]
        assert entry["faketime"] == "+6m"
        assert abs(entry["skew_seen_s"] - 360) < 3, entry
        assert abs(entry["unskewed_seen_s"]) < 3, entry
        assert entry["replaced_exit"] == 0 and entry["skewed_exit"] == 0, "graceful stops"
        assert entry["ended"] - began >= 1.5, "skewed for the hold"
        assert sup.procs["worker-writer"].starts == 3 and sup.procs["worker-writer"].env is None
        assert sup.unexpected_exits() == []
        assert n.done[1]["skipped"] == "worker-writer already skewed" and n.counts["clock-skew"] == 1
        heal = REGISTRY["clock-skew"].heal
        assert heal is not None
        heal(n)
        assert sup.all_up()
    finally:
        sup.stop()


def test_a_restart_after_the_supervisor_stopped_starts_nothing(tmp_path: Path) -> None:
    sup = Supervisor(dict(os.environ), tmp_path, cwd=tmp_path)
    sup.add("worker-writer", "-c", STAND_IN, launcher=(sys.executable,))
    sup.start()
    sup.stop()
    out = sup.replace("worker-writer", env=skewed(dict(os.environ), 3))
    assert out["stop_seconds"] < 1
    popen = sup.procs["worker-writer"].popen
    assert popen is not None and popen.poll() is not None and sup.procs["worker-writer"].starts == 1


def _ready_after(sup: Supervisor, name: str, offset: int, timeout: float = 30) -> float:
    """Seconds the clock of the start after `offset` in its log is off, from its ready line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at = ready_clock(sup.log_of(name).read_text()[offset:])
        if at is not None:
            return at - time.time()
        time.sleep(0.05)
    raise AssertionError(f"no ready line from {name}")


@needs_faketime
def test_a_skewed_worker_killed_meanwhile_comes_back_skewed(tmp_path: Path) -> None:
    sup = Supervisor(dict(os.environ), tmp_path, cwd=tmp_path)
    sup.add("worker-writer", "-c", STAND_IN, launcher=(sys.executable,), env=skewed(dict(os.environ), 4))
    sup.start()
    try:
        assert abs(_ready_after(sup, "worker-writer", 0) - 240) < 3
        offset = len(sup.log_of("worker-writer").read_text())
        assert sup.kill("worker-writer", hold=0.1) is not None
        assert abs(_ready_after(sup, "worker-writer", offset) - 240) < 3
        assert sup.procs["worker-writer"].starts == 2
    finally:
        sup.stop()


def test_a_worker_that_will_not_stop_is_killed_after_the_grace(tmp_path: Path) -> None:
    assert STOP_GRACE == 30.0, "as docs/reliability.md gives it"
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(60)\n"
    sup = Supervisor(dict(os.environ), tmp_path, cwd=tmp_path)
    sup.add("worker-writer", "-c", stubborn, launcher=(sys.executable,))
    try:
        deadline = time.monotonic() + 30
        while "up" not in sup.log_of("worker-writer").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        out = sup.replace("worker-writer", grace=0.5)
        assert out["exit"] == "SIGKILL after grace" and 0.5 <= out["stop_seconds"] < 5
        assert sup.procs["worker-writer"].starts == 2
    finally:
        sup.stop()

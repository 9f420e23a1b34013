"""The soak's instruments: growth after the warm-up within a process's last PID, median
edges, database figures, the report table, and the sampler on a real process tree."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from chaos.soak import (
    Growth,
    Sampler,
    database_figures,
    descendants,
    growth,
    markdown_table,
    read_samples,
    rss_kb,
)


def tick(at: float, db: int | None = None, **procs: tuple[int, int, int] | None) -> dict[str, Any]:
    """One sample line: procs maps a name to (pid, rss kB, fds), or None while it is down."""
    return {
        "at": at,
        "db_bytes": db,
        "procs": {
            name: None if p is None else {"pid": p[0], "children": [], "rss_kb": p[1], "fds": p[2]}
            for name, p in procs.items()
        },
    }


def test_rss_is_read_from_the_status_text() -> None:
    status = "Name:\tpython\nVmPeak:\t  900 kB\nVmRSS:\t   51234 kB\nThreads:\t4\n"
    assert rss_kb(status) == 51234
    assert rss_kb("Name:\tkthreadd\nThreads:\t1\n") is None


def test_growth_starts_after_the_warmup_and_takes_medians_of_the_edges() -> None:
    # Before the warm-up the process grows fast (imports, caches): not counted.
    rows = [tick(0, relay=(10, 10_000, 9)), tick(60, relay=(10, 50_000, 20))]
    # After it: 100 MB, one spike of 400 MB among the first three, then 110 MB at the end.
    rss = [100_000, 400_000, 100_000, 104_000, 108_000, 110_000, 110_000, 900_000]
    rows += [tick(600 + 60 * i, relay=(10, r, 20 + (i == 7))) for i, r in enumerate(rss)]
    [g] = growth(rows, warmup=600, k=3)
    assert g.samples == 8 and g.restarts == 0
    assert (g.rss_first_kb, g.rss_last_kb) == (100_000, 110_000)  # neither spike decides
    assert g.rss_growth_pct == 10.0
    assert (g.fds_first, g.fds_last, g.fds_growth) == (20, 20, 0)


def test_a_restart_is_noted_and_its_memory_not_counted_as_growth() -> None:
    rows = [tick(0, worker=(10, 100_000, 30))]
    rows += [tick(t, worker=(10, 300_000, 60)) for t in (100, 200)]
    rows.append(tick(300, worker=None))  # down between two lives
    later = [tick(400 + 100 * i, worker=(11, 100_000 + 1000 * i, 30)) for i in range(4)]
    later[0]["procs"]["worker"]["restart"] = True
    [g] = growth(rows + later, warmup=50, k=2)
    assert g.pid == 11 and g.samples == 4 and g.restarts == 1
    assert g.rss_first_kb == 100_500 and g.rss_last_kb == 102_500
    assert g.rss_growth_pct == 2.0


def test_a_process_with_fewer_than_two_samples_after_the_warmup_is_left_out() -> None:
    rows = [
        tick(0, a=(1, 10, 1), b=(2, 10, 1)),
        tick(700, a=(1, 11, 1), b=(2, 12, 1)),
        tick(800, a=(1, 12, 1)),
    ]
    assert [g.process for g in growth(rows, warmup=600)] == ["a"]
    assert growth([], warmup=600) == []


def test_database_figures_and_the_table() -> None:
    rows = [tick(0, db=None), tick(60, db=10 * 1_048_576), tick(120, db=30 * 1_048_576)]
    prune = {
        "after_prune_bytes": 30 * 1_048_576,
        "after_vacuum_bytes": 29 * 1_048_576,
        "after_vacuum_full_bytes": 12 * 1_048_576,
        "total": 4321,
    }
    db = database_figures(rows, prune)
    assert db["first_bytes"] == 10 * 1_048_576 and db["last_bytes"] == 30 * 1_048_576
    assert db["pruned_rows"] == 4321
    g = Growth("relay", 7, 10, 1, 102_400, 112_640, 10.0, 20, 23, 3)
    table = markdown_table([g], db, warmup=600)
    assert "| relay | 10 | 1 | 100.0 → 110.0 MB | +10.0 % | 20 → 23 (+3) |" in table
    assert "| after `pressroom prune` (4321 rows) | 30.0 MB |" in table
    assert "| after `VACUUM FULL` | 12.0 MB |" in table
    assert "10-minute warm-up" in table


# A parent that starts its child from a second thread, which stays alive: /proc lists that
# child under the thread, not under the main task.
PARENT = """
import subprocess, sys, threading, time
started = threading.Event()
def start():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started.set()
    time.sleep(30)  # alive: the child stays listed under this thread
threading.Thread(target=start, daemon=True).start()
started.wait()
print("ok", flush=True)
time.sleep(30)
"""


class Procs:
    def __init__(self, pids: dict[str, int | None]) -> None:
        self.now = pids

    def pids(self) -> dict[str, int | None]:
        return self.now


def test_the_sampler_reads_a_real_process_tree_and_notes_a_new_pid(tmp_path: Path) -> None:
    first = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    second = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    children: list[int] = []
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "ok"
        children = descendants(first.pid)
        [child] = children
        engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
        procs = Procs({"worker": first.pid})
        sampler = Sampler(procs, engine, tmp_path / "soak.jsonl", interval=3600)
        one = sampler.sample()
        procs.now = {"worker": second.pid}
        two = sampler.sample()
        w = one["procs"]["worker"]
        assert w["pid"] == first.pid and w["children"] == [child]
        assert w["rss_kb"] > 5000 and w["fds"] >= 3 and not w["restart"]
        assert two["procs"]["worker"]["restart"] is True and two["db_bytes"] is None
        sampler.start()
        sampler.stop()
        assert not sampler.is_alive()
        [line] = read_samples(tmp_path / "soak.jsonl")
        assert line["procs"]["worker"]["pid"] == second.pid
    finally:
        for p in (first, second):
            p.kill()
            p.wait()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_report_carries_a_soaks_tables_and_a_plain_run_none() -> None:
    from chaos.report import _soak

    assert _soak(None) == []
    g = Growth("worker-writer", 9, 40, 0, 204_800, 215_040, 5.0, 30, 30, 0)
    lines = _soak(
        {
            "samples": 61,
            "warmup_seconds": 600.0,
            "growth": [asdict(g)],
            "database": {"first_bytes": 1_048_576, "last_bytes": 2_097_152},
        }
    )
    assert lines[0] == "Soak: 61 samples."
    assert "| worker-writer | 40 | 0 | 200.0 → 210.0 MB | +5.0 % | 30 → 30 (+0) |" in lines

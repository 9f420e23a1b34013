"""DBOS Transact's 5-step no-op workflow at N threads (a helper of bench/e2e_throughput.py).

    python bench/_dbos_noop.py POSTGRES_URL [--workflows 600] [--threads 20] [--warmup 40] [--latency]

Needs the optional `bench` extra (`pip install -e '.[bench]'`: DBOS Transact).
Each workflow runs five `@DBOS.step()` functions that return at once; every
step is checkpointed in DBOS's system database on PostgreSQL (the database
given, which DBOS migrates on launch). Workflows are started by a pool of
`--threads` threads, each calling the workflow function directly (synchronous
durable execution, no queue). Prints one JSON object: workflows, seconds,
workflows/s, steps/s, and the CPU seconds this process used in the timed part.

With `--latency`, one thread runs the workflows one after another and times
each step call inside its workflow (`time.perf_counter()` around the call:
the step's checkpoint commit included); it prints the steps' median and p99
in milliseconds instead (a helper of bench/harness_throughput.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

STEPS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="postgresql://… of an empty database")
    parser.add_argument("--workflows", type=int, default=600)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--latency", action="store_true", help="time single steps, one thread")
    opts = parser.parse_args()

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(
        config={
            "name": "pressroom-bench-dbos",
            "system_database_url": opts.url,
            "sys_db_pool_size": opts.threads + 5,
            "log_level": "WARNING",
        }
    )

    @DBOS.step()
    def step(i: int) -> int:
        return i

    step_seconds: list[float] = []

    @DBOS.workflow()
    def workflow() -> int:
        total = 0
        for i in range(STEPS):
            t = time.perf_counter()
            total += step(i)
            step_seconds.append(time.perf_counter() - t)
        return total

    DBOS.launch()
    if opts.latency:
        try:
            print(json.dumps(_latency(workflow, step_seconds, opts.workflows, opts.warmup)))
        finally:
            DBOS.destroy()
        return
    try:
        with ThreadPoolExecutor(max_workers=opts.threads) as pool:
            list(pool.map(lambda _: workflow(), range(opts.warmup)))
            cpu0, t0 = os.times(), time.perf_counter()
            list(pool.map(lambda _: workflow(), range(opts.workflows)))
            seconds, cpu1 = time.perf_counter() - t0, os.times()
    finally:
        DBOS.destroy()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    print(
        json.dumps(
            {
                "workflows": opts.workflows,
                "threads": opts.threads,
                "steps_per_workflow": STEPS,
                "seconds": seconds,
                "workflows_per_s": opts.workflows / seconds,
                "steps_per_s": opts.workflows * STEPS / seconds,
                "cpu_seconds": cpu,
            }
        )
    )


def _latency(workflow: Callable[[], int], step_seconds: list[float], n: int, warmup: int) -> dict[str, Any]:
    for _ in range(warmup):
        workflow()
    step_seconds.clear()
    for _ in range(n):
        workflow()
    ordered = sorted(step_seconds)
    return {
        "steps": len(ordered),
        "median_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)] * 1000,
    }


if __name__ == "__main__":
    main()

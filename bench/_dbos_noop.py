"""DBOS Transact's 5-step no-op workflow at N threads (a helper of bench/e2e_throughput.py).

    python bench/_dbos_noop.py POSTGRES_URL [--workflows 600] [--threads 20] [--warmup 40]

Needs the optional `bench` extra (`pip install -e '.[bench]'`: DBOS Transact).
Each workflow runs five `@DBOS.step()` functions that return at once; every
step is checkpointed in DBOS's system database on PostgreSQL (the database
given, which DBOS migrates on launch). Workflows are started by a pool of
`--threads` threads, each calling the workflow function directly (synchronous
durable execution, no queue). Prints one JSON object: workflows, seconds,
workflows/s, steps/s, and the CPU seconds this process used in the timed part.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

STEPS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="postgresql://… of an empty database")
    parser.add_argument("--workflows", type=int, default=600)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=40)
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

    @DBOS.workflow()
    def workflow() -> int:
        total = 0
        for i in range(STEPS):
            total += step(i)
        return total

    DBOS.launch()
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


if __name__ == "__main__":
    main()

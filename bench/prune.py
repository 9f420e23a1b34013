"""Retention bench: rows per second `pressroom prune` removes on PostgreSQL, and
what a prune running alongside costs a handoff.

Setup: a fresh PostgreSQL database at the head migration; `--sagas` finished
sagas (default 100,000), inserted with bulk SQL (`generate_series`), each with
10 events, 2 checkpoints, 1 ledger row, 4 sent outbox rows, their 4 inbox rows
and 4 finished work rows, all 30 days old (25 rows per saga).

Handoff: one hop of the product's consumer path in this process, on the same
database: `Dispatcher.dispatch` in a unit of work (work row + outbox row), the
after-commit send to the in-process broker, then `Consumer.handle` (the lease,
a handler that changes nothing, the inbox row with the completion, the `applied` event). The
saga it works for is not finished, so prune never touches it. Timed from
before the dispatch to the end of `handle`.

Phases: handoffs alone (`--handoffs` of them), then the same handoffs, back to
back, for as long as `pressroom prune --older-than 1d` runs as a process of its
own. Prune rate = rows removed / the prune's wall time (reported by the command).

Not a test: it asserts nothing, it measures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import (
    Stats,
    bench_env,
    command_line,
    fmt_ms,
    git_rev,
    pg_database,
    stamp,
    table,
    write_section,
)
from sqlalchemy import text

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.core.routing import RESEARCH
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import make_engine, unit_of_work
from orchestrator.store.tables import SagaRow
from outbox.handlers import noop

TITLE = "Retention: prune rate and a concurrent handoff"

BULK = [
    """INSERT INTO sagas (id, brief, corpus, destinations, state, head_version, run, review_rounds,
         created_by, trace_context, created_at, updated_at)
       SELECT 'b' || lpad(g::text, 7, '0'), 'bench', '/c', '["site:/x"]'::json, 'succeeded', 1, 1, 0,
         'bench', '{}'::json, :old, :old FROM generate_series(1, :n) g""",
    """INSERT INTO events (event_id, saga_id, actor, kind, status, detail, created_at, prev_hash, hash)
       SELECT md5(g::text || '-' || e), 'b' || lpad(g::text, 7, '0'), 'bench', 'transition', 'x',
         '{}'::json, :old, md5('p' || g::text || '-' || e), md5('h' || g::text || '-' || e)
       FROM generate_series(1, :n) g, generate_series(1, 10) e""",
    """INSERT INTO checkpoints (saga_id, event_id, step, state, prev_hash, hash, created_at)
       SELECT 'b' || lpad(g::text, 7, '0'), 'e', c, '{}'::json, 'p', md5('c' || g::text || '-' || c), :old
       FROM generate_series(1, :n) g, generate_series(1, 2) c""",
    """INSERT INTO ledger (key, tool, saga_id, args_digest, status, attempts, created_at, updated_at)
       SELECT 'k' || g::text, 'publish', 'b' || lpad(g::text, 7, '0'), 'x', 'done', 1, :old, :old
       FROM generate_series(1, :n) g""",
    """INSERT INTO outbox (id, saga_id, task, queue, payload, headers, created_at, sent_at, send_attempts)
       SELECT 'o' || g::text || '-' || m, 'b' || lpad(g::text, 7, '0'), 'pressroom.writer.draft', 'writer',
         '{}'::json, '{}'::json, :old, :old, 1 FROM generate_series(1, :n) g, generate_series(1, 4) m""",
    """INSERT INTO inbox (message_id, consumer, processed_at)
       SELECT 'o' || g::text || '-' || m, 'bench', :old FROM generate_series(1, :n) g, generate_series(1, 4) m""",
    """INSERT INTO work (id, saga_id, task, queue, payload, attempts, lease_until, holder, done_at, created_at)
       SELECT 'w' || g::text || '-' || m, 'b' || lpad(g::text, 7, '0'), 'pressroom.writer.draft', 'writer',
         '{}'::json, 1, :old, 'x', :old, :old FROM generate_series(1, :n) g, generate_series(1, 4) m""",
]
ROWS_PER_SAGA = 10 + 2 + 1 + 4 + 4 + 4


def seed(url: str, sagas: int) -> float:
    engine = make_engine(url)
    old = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=30)
    started = time.perf_counter()
    with engine.begin() as conn:
        for sql in BULK:
            conn.execute(text(sql), {"n": sagas, "old": old})
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    return time.perf_counter() - started


def handoff_app(url: str) -> tuple[Pressroom, str]:
    app = build_app(Settings(database_url=url, broker_url="inline://", secret="bench"))
    app.handlers[RESEARCH] = lambda _handoff, _holder: noop
    with unit_of_work(app.engine) as uow:
        saga = SagaRow(
            brief="handoffs", corpus="/c", destinations=["site:/x"], state="preparing", created_by="b"
        )
        uow.session.add(saga)
        saga_id = saga.id
    return app, saga_id


def one_handoff(app: Pressroom, saga_id: str) -> float:
    t0 = time.perf_counter()
    with unit_of_work(app.engine) as uow:
        app.dispatcher.dispatch(uow, saga_id=saga_id, task=RESEARCH)
    handled = app.broker.drain(app.consumer.handle)  # type: ignore[attr-defined]
    assert handled == 1
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sagas", type=int, default=100_000)
    parser.add_argument("--handoffs", type=int, default=300)
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    args = parser.parse_args()

    with pg_database("bench_prune") as url:
        seeded = seed(url, args.sagas)
        print(f"seeded {args.sagas} sagas ({args.sagas * ROWS_PER_SAGA} rows) in {seeded:.1f} s")
        app, saga_id = handoff_app(url)
        for _ in range(20):  # warm the pool and the statement caches
            one_handoff(app, saga_id)
        alone = [one_handoff(app, saga_id) for _ in range(args.handoffs)]

        # The prune is what an operator runs: `pressroom prune` as a process of its own.
        env = bench_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_SECRET="bench")
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "pressroom"), "prune", "--older-than", "1d", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        stamped: list[tuple[datetime, float]] = []
        while proc.poll() is None:
            stamped.append((datetime.now(UTC), one_handoff(app, saga_id)))
        out, _ = proc.communicate()
        report = json.loads(out)
        # Only the handoffs that started while the prune itself ran (not the CLI's start-up).
        began = datetime.fromisoformat(report["started_at"].replace("Z", "+00:00"))
        ended = datetime.fromisoformat(report["finished_at"].replace("Z", "+00:00"))
        during = [took for at, took in stamped if began <= at <= ended]
        removed = int(report["total"])
        seconds = float(report["seconds"])

    base, loaded = Stats("alone", alone), Stats("during prune", during)
    rate = removed / seconds if seconds else float("nan")
    body = "\n".join(
        [
            f"Command: `{command_line()}` — code at {git_rev()}, {stamp()}.",
            "",
            f"{args.sagas:,} finished sagas, {args.sagas * ROWS_PER_SAGA:,} rows (seeded with bulk SQL in "
            f"{seeded:.1f} s). Prune removed **{removed:,} rows in {seconds:.1f} s: {rate:,.0f} rows/s** "
            f"({report['sagas']:,} sagas, batches of 500, one transaction each; wall time inside the "
            "`pressroom prune` process).",
            "",
            table(
                ["handoff (dispatch → applied)", "n", "median ms", "p99 ms"],
                [
                    ["no prune running", base.n, fmt_ms(base.median), fmt_ms(base.p99)],
                    ["while prune runs", loaded.n, fmt_ms(loaded.median), fmt_ms(loaded.p99)],
                ],
            ),
            "",
            "The handoff is the product's consumer path in-process on the same database (see the module "
            "docstring of `bench/prune.py`); `pressroom prune --older-than 1d` runs as a process of its "
            "own while the handoffs go on back to back. Rows per table: "
            + ", ".join(f"{k} {v:,}" for k, v in report["rows"].items())
            + ".",
        ]
    )
    print(body)
    if not args.no_write:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()

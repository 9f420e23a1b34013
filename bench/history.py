"""History bench: what a year of finished sagas costs the reads of the present, the
relay's idle cycle, and a live saga while `prune` runs.

Setup: a scratch PostgreSQL database (created and dropped here, never `test`) at
the head migration, loaded with COPY through psycopg in the product's table shapes:
per finished saga its row, one version, one approval, two steps (site and
webhook), eight events in a hash-linked chain (submitted, version created, two
transitions to review and approval, approval, executing, one step event per
destination, the final transition), two checkpoints, two ledger rows, four sent
outbox rows with their inbox rows and four finished work rows: 30 rows. States:
80 % succeeded (one in ten of them after an effect-unknown step a person
reconciled, with the reconcile event), 15 % failed (a webhook refusal, the site
step compensated), 5 % cancelled. The last change of each lies 1 to 365 days
back. Alive among them, at every size: 40 sagas in ready-for-review (ready for 1
to 48 hours), 10 preparing with open work, 5 executing, 5 effect-unknown.

Two databases: one loaded to the first of `--sizes` (the baseline), one to the
last. A load whose projected time passes `--load-budget` stops early, and the
report says at what size.

Each read is timed in this process through the product's own code, on an app
built once per database (`build_app`), so the figure is the command's work, not
Python's start-up; the two databases are read interleaved, one sample of each per
round, so both sizes meet the same machine (it is shared). Medians of `--repeat`.
A last row times a whole `pressroom status --json` process on each: no read in it
grows with the history, so it shows how far the machine itself moved:

* `status` first page: the CLI's quick path (`PgReads` + `read_model.status`,
  what `pressroom status --json` runs) and the full path (`Reads.status`);
* `status` after a cursor halfway down the history (full path: the quick path
  leaves cursors to it);
* `status --waiting` (`Reads.status(waiting=True)`);
* the review queue page (`workspace.load_queue`, view `waiting` and view `all`);
* one old saga: `Reads.status(id)` and the web page's loader (`load_workspace`);
* the relay's idle cycle: `Relay.run_once()` then `Relay.sweep()` (unsent rows,
  expired leases, lapsed approvals, the retention schedule) with nothing to do.

Prune under load, at the largest size: `pressroom prune --older-than WINDOW` as a
process of its own while this process drives a live saga's writes back to back
(one unit of work: the product's `insert_event` on the executing saga, which
takes its chain lock, and its step row's update; `lock_timeout` 1 s). The figure is
the longest write (the worst stall), beside the same writes with no prune running.

Not a test: it asserts nothing, it measures.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import (
    Stats,
    bench_env,
    command_line,
    fmt_ms,
    fmt_x,
    git_rev,
    pg_database,
    ratio,
    stamp,
    table,
    write_section,
)

TITLE = "History: reads, the relay's idle cycle and prune at a million finished sagas"
GOAL_RATIO = 1.5
GOAL_STALL_MS = 100.0
ROWS_PER_SAGA = 30
NOW = datetime.now(UTC).replace(microsecond=0)
LIVE = {"ready-for-review": 40, "preparing": 10, "executing": 5, "effect-unknown": 5}
GENESIS = "0" * 64


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f+00")


def sid(i: int) -> str:
    return hashlib.md5(f"history-{i}".encode()).hexdigest()


def jdump(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


class Copy:
    """Tab-separated COPY text per table, flushed in chunks."""

    COLUMNS = {
        "sagas": "id, brief, corpus, destinations, state, head_version, run, review_rounds, created_by, "
        "reason, trace_context, ready_at, pipeline, prep_round, created_at, updated_at",
        "versions": "id, saga_id, number, digest, title, author, markdown, citations, review, created_at",
        "approvals": "id, saga_id, version, version_digest, destinations, session, approver, issued_at, "
        "expires_at, token, consumed_at, consumed_by",
        "steps": "id, saga_id, position, uri, state, idempotency_key, receipt, version_digest, updated_at",
        "events": "event_id, saga_id, actor, kind, status, tool, detail, created_at, prev_hash, hash, "
        "schema_version",
        "checkpoints": "saga_id, event_id, step, state, prev_hash, hash, created_at",
        "ledger": "key, tool, saga_id, args_digest, status, result, event_id, attempts, created_at, updated_at",
        "outbox": "id, saga_id, task, queue, payload, headers, created_at, sent_at, send_attempts",
        "inbox": "message_id, consumer, processed_at",
        "work": "id, saga_id, task, queue, payload, attempts, lease_until, holder, done_at, created_at",
    }

    def __init__(self) -> None:
        self.buf = {name: io.StringIO() for name in self.COLUMNS}
        self.rows = 0

    def add(self, name: str, *values: object) -> None:
        self.buf[name].write("\t".join("\\N" if v is None else str(v) for v in values) + "\n")
        self.rows += 1

    def flush(self, conn: Any) -> None:
        with conn.cursor() as cur:
            for name, cols in self.COLUMNS.items():
                data = self.buf[name].getvalue()
                if data:
                    with cur.copy(f"COPY {name} ({cols}) FROM STDIN") as copy:
                        copy.write(data)
        conn.commit()
        self.buf = {name: io.StringIO() for name in self.COLUMNS}


TASKS = [
    ("pressroom.researcher.research", "researcher"),
    ("pressroom.writer.draft", "writer"),
    ("pressroom.reviewer.review", "reviewer"),
    ("pressroom.publisher.publish", "publisher"),
]


def saga_rows(out: Copy, i: int, state: str, rng: random.Random, live: bool = False) -> None:
    """One saga in `state`, with its history, as the product's tables hold it."""
    s = sid(i)
    if live:
        updated = NOW - timedelta(hours=rng.uniform(1, 48))
    else:
        updated = NOW - timedelta(days=rng.uniform(1, 365))
    created = updated - timedelta(minutes=rng.uniform(2, 30))
    ready = created + timedelta(seconds=40)
    digest = hashlib.sha256(s.encode()).hexdigest()
    dests = [f"site:/srv/site/{s[:8]}", f"webhook:https://hooks.example.org/{s[:8]}"]
    reconciled = state == "succeeded" and i % 10 == 3
    reason = {"failed": "webhook refused: 422", "cancelled": "cancelled by olga"}.get(state)
    brief = f"Notes on the canal network, part {i}: locks, tolls and the boats that used them"
    out.add(
        "sagas",
        s,
        brief,
        "/srv/corpus",
        jdump(dests),
        state,
        0 if state == "preparing" else 1,
        1,
        0,
        "dana",
        reason,
        "{}",
        ts(ready) if state == "ready-for-review" else None,
        "default",
        1,
        ts(created),
        ts(updated),
    )
    if state != "preparing":
        md = f"# The canal network {i}\\n\\nLocks were built in 1790 [1]. Tolls paid for them [2].\\n"
        cites = jdump(
            [{"marker": 1, "source": "locks.md", "quote": "built in 1790", "source_digest": digest}]
        )
        out.add(
            "versions",
            f"v{s}",
            s,
            1,
            digest,
            f"The canal network {i}",
            "writer",
            md,
            cites,
            jdump({"verdict": "pass", "findings": []}),
            ts(ready),
        )
    events: list[tuple[str, str, str | None, dict[str, Any]]] = [
        ("saga", "submitted", None, {"destinations": dests}),
        ("version", "created", None, {"version": 1, "digest": digest}),
        ("transition", "ok", None, {"from": "preparing", "to": "ready-for-review"}),
    ]
    if state not in ("preparing", "ready-for-review"):
        issued = ready + timedelta(minutes=5)
        out.add(
            "approvals",
            f"a{s}",
            s,
            1,
            digest,
            jdump(dests),
            "run-1",
            "erin",
            ts(issued),
            ts(issued + timedelta(hours=24)),
            hashlib.sha256(digest.encode()).hexdigest(),
            ts(issued + timedelta(seconds=1)),
            "publisher",
        )
        events += [
            ("approval", "granted", None, {"version": 1, "approver": "erin"}),
            ("transition", "ok", None, {"from": "approved", "to": "executing"}),
        ]
        steps = {
            "succeeded": ("done", "done"),
            "failed": ("compensated", "failed"),
            "cancelled": ("compensated", "pending"),
            "executing": ("done", "executing"),
            "effect-unknown": ("done", "uncertain"),
        }[state]
        for pos, (uri, st) in enumerate(zip(dests, steps, strict=True)):
            key = hashlib.sha256(f"{s}{uri}".encode()).hexdigest()
            receipt = (
                jdump({"path": f"/srv/site/{s[:8]}/index.md"}) if st in ("done", "compensated") else None
            )
            out.add("steps", f"st{pos}{s}", s, pos, uri, st, key, receipt, digest, ts(updated))
            events.append(("step", st, "publish", {"uri": uri, "state": st, "key": key}))
            out.add(
                "ledger",
                key,
                "publish",
                s,
                digest,
                "done" if st != "uncertain" else "uncertain",
                receipt,
                f"e{pos}{s}",
                1,
                ts(updated),
                ts(updated),
            )
            out.add(
                "checkpoints",
                s,
                f"e{pos}{s}",
                pos + 1,
                jdump({"step": pos + 1, "saga": s}),
                f"{pos}{digest[1:]}",
                f"c{pos}{s}{digest[:31]}",
                ts(updated),
            )
        if reconciled:
            events.append(
                ("reconcile", "confirmed", None, {"uri": dests[1], "by": "olga", "reason": "seen live"})
            )
        if state in ("succeeded", "failed", "cancelled"):
            events.append(("transition", "ok", None, {"from": "executing", "to": state}))
    prev = GENESIS
    for n, (kind, status, tool, detail) in enumerate(events):
        h = hashlib.sha256(f"{s}-{n}".encode()).hexdigest()
        out.add(
            "events",
            f"{n:02d}{s}",
            s,
            "pressroom",
            kind,
            status,
            tool,
            jdump(detail),
            ts(created + timedelta(seconds=n * 7)),
            prev,
            h,
            2,
        )
        prev = h
    finished = state in ("succeeded", "failed", "cancelled")
    for m, (task, queue) in enumerate(TASKS if finished else TASKS[:1]):
        mid = f"o{m}{s}"
        at = created + timedelta(seconds=m * 20)
        out.add("outbox", mid, s, task, queue, jdump({"saga_id": s}), "{}", ts(at), ts(at), 1)
        out.add("inbox", mid, "worker", ts(at))
        open_work = not finished and state == "preparing"
        lease = NOW + timedelta(minutes=10) if open_work else at + timedelta(seconds=60)
        out.add(
            "work",
            f"w{m}{s}",
            s,
            task,
            queue,
            jdump({"saga_id": s}),
            1,
            ts(lease),
            None if open_work else "worker",
            None if open_work else ts(at + timedelta(seconds=3)),
            ts(at),
        )


def finished_state(i: int) -> str:
    r = i % 20
    return "failed" if r < 3 else "cancelled" if r == 3 else "succeeded"


def load(plain_url: str, start: int, stop: int, budget_left: float, chunk: int = 20_000) -> tuple[int, float]:
    """Finished sagas `start..stop-1`; stops early (at a chunk's end) when the projected time
    passes `budget_left`. The index reached and the seconds taken."""
    import psycopg

    rng = random.Random(start)
    began = time.perf_counter()
    with psycopg.connect(plain_url) as conn:
        conn.execute("SET synchronous_commit = off")
        i = start
        while i < stop:
            out = Copy()
            end = min(stop, i + chunk)
            for k in range(i, end):
                saga_rows(out, k, finished_state(k), rng)
            out.flush(conn)
            i = end
            took = time.perf_counter() - began
            rate = (i - start) / took
            print(f"  loaded {i:,} sagas ({rate:,.0f} sagas/s)", flush=True)
            if i < stop and took + (stop - i) / rate > budget_left:
                break
        conn.execute("ANALYZE")
        conn.commit()
    return i, time.perf_counter() - began


def load_live(plain_url: str) -> dict[str, list[str]]:
    import psycopg

    rng = random.Random(7)
    out = Copy()
    ids: dict[str, list[str]] = {}
    base = 900_000_000
    for state, count in LIVE.items():
        for _ in range(count):
            saga_rows(out, base, state, rng, live=True)
            ids.setdefault(state, []).append(sid(base))
            base += 1
    with psycopg.connect(plain_url) as conn:
        out.flush(conn)
    return ids


def interleaved(
    base: dict[str, Callable[[], object]], top: dict[str, Callable[[], object]], repeat: int
) -> tuple[dict[str, Stats], dict[str, Stats]]:
    """Each read on both databases, one sample of each per round (which goes first alternates),
    after one warm-up of each: both sizes meet the same moment's machine."""
    out_b: dict[str, Stats] = {}
    out_t: dict[str, Stats] = {}
    for name in base:
        pair = (base[name], top[name])
        for fn in pair:
            fn()
        samples: tuple[list[float], list[float]] = ([], [])
        for r in range(repeat):
            for k in (0, 1) if r % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                pair[k]()
                samples[k].append(time.perf_counter() - t0)
        out_b[name], out_t[name] = Stats(name, samples[0]), Stats(name, samples[1])
    return out_b, out_t


def read_cases(app: Any, url: str, plain: str) -> dict[str, Callable[[], object]]:
    """The reads timed, on `app`'s database, by name."""
    from sqlalchemy import text

    from orchestrator.entrypoints.web import workspace
    from orchestrator.reads import read_model, read_shapes
    from orchestrator.reads.pg_reads import PgReads

    with app.engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM sagas")).scalar_one()
        mid = conn.execute(
            text("SELECT created_at, id FROM sagas ORDER BY created_at DESC, id DESC OFFSET :o LIMIT 1"),
            {"o": n // 2},
        ).one()
        old = conn.execute(
            text("SELECT id FROM sagas WHERE state = 'succeeded' ORDER BY updated_at LIMIT 1 OFFSET 100")
        ).scalar_one()
    cursor = read_shapes.encode_cursor(mid[0], mid[1])

    def quick_first() -> object:
        reads = PgReads.open_at_head(plain)
        assert reads is not None, "the quick path did not answer"
        with reads:
            return read_model.status(
                reads, None, limit=None, after=None, waiting=False, reminder=None, now=NOW
            )

    def queue(view: str) -> Callable[[], object]:
        return lambda: workspace.load_queue(
            app, view=view, state=None, search=None, after=None, principal=None
        )

    # The whole command as a process: Python's start-up and imports dominate it.
    env = bench_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_SECRET="bench")
    exe = str(Path(sys.executable).parent / "pressroom")

    def whole_process() -> object:
        return subprocess.run([exe, "status", "--json"], env=env, check=True, capture_output=True)

    assert app.reads.status(after=cursor)["sagas"], "the cursor page is empty"
    waiting = app.reads.status(waiting=True)
    assert len(waiting["sagas"]) == LIVE["ready-for-review"], len(waiting["sagas"])
    assert app.relay.run_once() == 0, "the relay found rows to send"
    return {
        "status first page (quick path, as the CLI)": quick_first,
        "status first page (full path)": lambda: app.reads.status(),
        "status page after a cursor halfway down": lambda: app.reads.status(after=cursor),
        "status --waiting": lambda: app.reads.status(waiting=True),
        "review queue page (waiting)": queue("waiting"),
        "review queue page (all)": queue("all"),
        "status SAGA_ID (an old saga)": lambda: app.reads.status(old),
        "saga web page's load (an old saga)": lambda: workspace.load_workspace(app, old),
        "relay idle cycle (run_once + sweep)": lambda: (app.relay.run_once(), app.relay.sweep()),
        "`pressroom status --json` (whole process)": whole_process,
    }


def drive_live(app: Any, saga_id: str) -> float:
    """One write of a live saga: its event (chain lock) and its step row; seconds."""
    from sqlalchemy import text

    from orchestrator.store.db import unit_of_work
    from orchestrator.store.events import insert_event

    t0 = time.perf_counter()
    with unit_of_work(app.engine) as uow:
        uow.session.execute(text("SET LOCAL lock_timeout = '1s'"))
        insert_event(uow.session, saga_id=saga_id, actor="bench", kind="message", status="applied", detail={})
        uow.session.execute(
            text("UPDATE steps SET updated_at = now() WHERE saga_id = :s AND position = 1"), {"s": saga_id}
        )
    return time.perf_counter() - t0


def prune_under_load(app: Any, url: str, saga_id: str, window: str, alone_n: int) -> dict[str, Any]:
    for _ in range(20):
        drive_live(app, saga_id)
    alone = [drive_live(app, saga_id) for _ in range(alone_n)]
    env = bench_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_SECRET="bench")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "pressroom"), "prune", "--older-than", window, "--json"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    stamped: list[tuple[datetime, float]] = []
    failed = 0
    while proc.poll() is None:
        at = datetime.now(UTC)
        try:
            stamped.append((at, drive_live(app, saga_id)))
        except Exception:  # lock_timeout: a stall of a second or more
            failed += 1
    out, _ = proc.communicate()
    report = json.loads(out)
    began = datetime.fromisoformat(report["started_at"].replace("Z", "+00:00"))
    ended = datetime.fromisoformat(report["finished_at"].replace("Z", "+00:00"))
    during = [took for at, took in stamped if began <= at <= ended]
    return {
        "alone": Stats("", alone),
        "during": Stats("", during),
        "report": report,
        "timeouts": failed,
        "over_goal": sum(1 for took in during if took * 1000 > GOAL_STALL_MS),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,1000000", help="finished sagas, comma-separated, rising")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="a small run: sizes 1000,5000, repeat 5")
    parser.add_argument("--prune-older-than", default="335d", help="prune's window at the largest size")
    parser.add_argument("--load-budget", type=float, default=1500.0, help="seconds the loads may take in all")
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    args = parser.parse_args()
    sizes = [1000, 5000] if args.quick else [int(s) for s in args.sizes.split(",")]
    repeat = 5 if args.quick else args.repeat

    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings

    load_avg = os.getloadavg()[0]
    base_n, want = sizes[0], sizes[-1]
    cut_short = ""
    settings = {"broker_url": "inline://", "secret": "bench"}
    with pg_database("bench_history_base") as base_url, pg_database("bench_history") as url:
        base_plain = base_url.replace("postgresql+psycopg", "postgresql")
        plain = url.replace("postgresql+psycopg", "postgresql")
        base_app = build_app(Settings(database_url=base_url, **settings))  # migrates
        load_live(base_plain)
        _, base_took = load(base_plain, 0, base_n, args.load_budget)
        app = build_app(Settings(database_url=url, **settings))
        live = load_live(plain)
        top_n, top_took = load(plain, 0, want, args.load_budget - base_took)
        print(
            f"{base_n:,} and {top_n:,} finished sagas loaded ({base_took:.0f} s, {top_took:.0f} s)",
            flush=True,
        )
        if top_n < want:
            cut_short = (
                f"The load toward {want:,} stopped at {top_n:,} sagas: at its rate the rest would "
                f"have passed the {args.load_budget:.0f} s budget."
            )
        base, top = interleaved(
            read_cases(base_app, base_url, base_plain), read_cases(app, url, plain), repeat
        )
        base_app.close()
        pruned = prune_under_load(app, url, live["executing"][0], args.prune_older_than, 200)
        app.close()
    measured = [(base_n, base, base_took), (top_n, top, top_took)]

    rows = []
    for name in base:
        r = ratio(top[name].median, base[name].median)
        rows.append(
            [
                name,
                fmt_ms(base[name].median),
                fmt_ms(top[name].median),
                fmt_x(r),
                "" if name.startswith("`") else ("met" if r <= GOAL_RATIO else "NOT met"),
            ]
        )
    rep = pruned["report"]
    alone, during = pruned["alone"], pruned["during"]
    worst = max(during.samples) if during.samples else float("nan")
    body = "\n".join(
        [
            f"Command: `{command_line()}` — code at {git_rev()}, {stamp()}; 1-minute load average "
            f"{load_avg:.1f} at the start.",
            "",
            f"Finished sagas loaded with COPY ({ROWS_PER_SAGA} rows each; see the module docstring of "
            f"`bench/history.py`) beside 60 live ones, in two databases; loads took "
            + ", ".join(f"{t:.0f} s to {n:,}" for n, _, t in measured)
            + ". Medians of "
            f"{repeat} in-process runs of the product's read (the command's work, not Python's start-up) on "
            "each database, the two interleaved, after one warm-up each. "
            f"Goal: each at {top_n:,} ≤ {GOAL_RATIO}× its cost at {base_n:,}.",
            *(["", cut_short] if cut_short else []),
            "",
            table(["read", f"{base_n:,} ms", f"{top_n:,} ms", "ratio", f"goal ≤{GOAL_RATIO}×"], rows),
            "",
            f"Prune under load at {top_n:,}: `pressroom prune --older-than {args.prune_older_than}` "
            f"removed {rep['total']:,} rows of {rep['sagas']:,} sagas in {rep['seconds']:.1f} s while a live "
            f"saga's writes (event + step, one unit of work) ran back to back: {during.n} writes, median "
            f"{fmt_ms(during.median)} ms, p99 {fmt_ms(during.p99)} ms, longest **{fmt_ms(worst)} ms** "
            f"({pruned['over_goal']} over {GOAL_STALL_MS:.0f} ms, {pruned['timeouts']} lock timeouts); "
            f"with no prune: median {fmt_ms(alone.median)} ms, p99 {fmt_ms(alone.p99)} ms, longest "
            f"{fmt_ms(max(alone.samples))} ms (n = {alone.n}). Goal: no stall over {GOAL_STALL_MS:.0f} ms: "
            + ("**met**." if worst * 1000 <= GOAL_STALL_MS else "**NOT met**."),
        ]
    )
    print(body)
    figures = {
        "sizes": [n for n, _, _ in measured],
        "repeat": repeat,
        "load_seconds": {str(n): t for n, _, t in measured},
        "reads_median_s": {name: {str(n): res[name].median for n, res, _ in measured} for name in base},
        "prune": {**rep, "stall_max_s": worst, "stall_p99_s": during.p99, "alone_max_s": max(alone.samples)},
    }
    print(json.dumps(figures))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    if not args.no_write:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()

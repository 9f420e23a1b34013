"""Harness throughput: tool calls per second through `Harness.call` vs a bare executor call.

    .venv/bin/python bench/harness_throughput.py [--n-read 400] [--n-publish 300]

Two tools, each on SQLite (a file in a temporary folder, WAL, as shipped) and
on PostgreSQL (a fresh database), sequential calls from one thread:

* `corpus.read` (read only): the harness path is proposal → bounded parse →
  validate → policy → execute → result event (one transaction).
* `publish` (high risk) to a `memory:` destination, each call on its own
  pre-seeded saga (approved, one version, a valid approval bound to it), so
  every call has a fresh business key and a fresh approval and nothing is
  replayed: proposal → parse → validate → ledger lookup → approval lookup →
  policy (HMAC check) → pre-execute record (approval consumed, checkpoint,
  ledger row `pending`, intent event: one transaction) → executor → ledger
  `done` + result event + the step's receipt (one transaction).

Next to each, the same executor called bare (`spec.executor(ctx, model)`,
input model built outside the timing) with the same kind of arguments (for
`publish`: other sagas seeded the same way, fresh keys too). Reported:
calls/s (n / wall time of the loop), median and p99 per call, and the ratio
bare throughput / harness throughput (how many times slower the harness
path is). Tracing is off (no exporter configured).

Two references, not proposals: `corpus.read` through the harness with its one
write (the read's event and budget charge) replaced by nothing, which is what
the in-memory path costs; and, on PostgreSQL, one `publish`'s wall time split
into its statements, its commits and the Python between them (SQLAlchemy's
cursor and commit events, in a pass of its own on fresh sagas).

With the optional `bench` extra installed (DBOS Transact), one DBOS step is
timed too, on a fresh database of the same PostgreSQL server, once before the
PostgreSQL calls and once after (`bench/_dbos_noop.py --latency`: one thread,
5-step no-op workflows one after another, each step call timed inside its
workflow), and the PostgreSQL medians are printed as a ratio to its median.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Stats,
    command_line,
    dbos_available,
    fmt_ms,
    fmt_x,
    git_rev,
    pg_database,
    ratio,
    run_dbos,
    stamp,
    table,
    write_section,
)

TITLE = "Harness throughput"
UNRECORDED = "harness, record replaced by nothing (reference)"
WARM = 20  # warm-up calls per path, not timed
MARKDOWN = "# The Millbrook library network\n\nA short history of its branches and the bookmobile [1].\n"


def seed_publish_sagas(app: Any, count: int, destination: str) -> list[tuple[str, str]]:
    """`count` sagas, each approved with one version and a valid approval; (saga id, digest)."""
    from orchestrator.harness.approvals import ApprovalBinding, mint, session_for
    from orchestrator.harness.digests import text_digest
    from orchestrator.store.db import unit_of_work
    from orchestrator.store.harness_store import approval_row
    from orchestrator.store.tables import SagaRow, VersionRow, utcnow

    out: list[tuple[str, str]] = []
    now = utcnow()
    with unit_of_work(app.engine) as uow:
        s = uow.session
        for i in range(count):
            sid = uuid.uuid4().hex
            s.add(
                SagaRow(
                    id=sid,
                    brief="harness bench",
                    corpus="",
                    destinations=[destination],
                    state="approved",
                    head_version=1,
                    created_by="bench",
                )
            )
            out.append((sid, text_digest(MARKDOWN + f"\nCopy {i}.\n")))
        s.flush()  # the versions and approvals refer to the sagas
        for i, (sid, digest) in enumerate(out):
            s.add(
                VersionRow(
                    saga_id=sid,
                    number=1,
                    digest=digest,
                    title="The Millbrook library network",
                    author="writer",
                    markdown=MARKDOWN + f"\nCopy {i}.\n",
                )
            )
            binding = ApprovalBinding(
                saga_id=sid,
                version=1,
                version_digest=digest,
                destinations=(destination,),
                session=session_for(sid, 1),
                approver="editor",
                expires_at=now + timedelta(hours=2),
            )
            s.add(approval_row(binding, mint(binding, app.signing_key), issued_at=now))
    return out


def seed_read_saga(app: Any) -> str:
    import roles
    from orchestrator.store.db import unit_of_work
    from orchestrator.store.tables import SagaRow

    sid = uuid.uuid4().hex
    corpus = Path(roles.__file__).parent / "sample_corpus"
    with unit_of_work(app.engine) as uow:
        uow.session.add(
            SagaRow(
                id=sid,
                brief="Write a short history of the Millbrook public library network.",
                corpus=str(corpus),
                destinations=["memory:unused"],
                state="preparing",
                created_by="bench",
            )
        )
    return sid


def timed_loop(calls: list[Callable[[], None]]) -> tuple[list[float], float]:
    samples: list[float] = []
    started = time.perf_counter()
    for call in calls:
        t = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t)
    return samples, time.perf_counter() - started


Variant = tuple[str, list[Callable[[], None]]]


class Counter:
    """Counts SQL statements and connection checkouts on an engine (SQLAlchemy events)."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.statements = 0
        self.checkouts = 0

        @event.listens_for(engine, "before_cursor_execute")
        def _statement(*_: Any) -> None:
            self.statements += 1

        @event.listens_for(engine.pool, "checkout")
        def _checkout(*_: Any) -> None:
            self.checkouts += 1

    def snapshot(self) -> tuple[int, int]:
        return self.statements, self.checkouts


def measure(
    db: str, tool: str, variants: list[Variant], warm: int, counter: Counter, block: int = 50
) -> list[dict[str, Any]]:
    """Run the variants' calls in alternating blocks (a shared machine's slow phases hit all alike)."""
    for _name, calls in variants:
        timed_loop(calls[:warm])
    samples: dict[str, list[float]] = {name: [] for name, _ in variants}
    wall: dict[str, float] = dict.fromkeys(samples, 0.0)
    sql: dict[str, list[int]] = {name: [0, 0] for name in samples}
    longest = max(len(calls) for _, calls in variants)
    for i in range(warm, longest, block):
        for name, calls in variants:
            before = counter.snapshot()
            got, seconds = timed_loop(calls[i : i + block])
            after = counter.snapshot()
            samples[name] += got
            wall[name] += seconds
            sql[name][0] += after[0] - before[0]
            sql[name][1] += after[1] - before[1]
    return [
        {
            "db": db,
            "tool": tool,
            "path": name,
            "stats": Stats(name, samples[name]),
            "wall": wall[name],
            "statements": sql[name][0] / len(samples[name]),
            "checkouts": sql[name][1] / len(samples[name]),
        }
        for name in samples
    ]


def publish_phases(engine: Any, calls: list[Callable[[], None]], warm: int) -> list[list[object]]:
    """Where one harness `publish` spends its wall time, from SQLAlchemy's events on `engine`:
    each statement from its send to its result, each commit, and the Python between them.
    Timed in a pass of its own (the event hooks cost a little), on fresh sagas."""
    from sqlalchemy import event

    marks: list[tuple[str, float]] = []

    def stamp_before(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        marks.append((" ".join(statement.split()[:3])[:48], time.perf_counter()))

    def stamp_after(*_: Any) -> None:
        marks.append(("", time.perf_counter()))

    def stamp_commit(*_: Any) -> None:
        marks.append(("COMMIT", time.perf_counter()))

    hooks = (
        ("before_cursor_execute", stamp_before),
        ("after_cursor_execute", stamp_after),
        ("commit", stamp_commit),
    )
    for name, fn in hooks:
        event.listen(engine, name, fn)
    series: dict[str, list[float]] = {}
    order: list[str] = []
    try:
        for i, call in enumerate(calls):
            marks.clear()
            started = time.perf_counter()
            call()
            ended = time.perf_counter()
            if i < warm:
                continue
            segments: list[tuple[str, float]] = []
            previous, at = "", started
            for what, t in marks + [("the answer", ended)]:
                if what == "":
                    name = f"`{previous} …`, sent → result"
                else:
                    done = "the commit, then Python" if previous == "COMMIT" else "Python"
                    shown = (
                        "the commit" if what == "COMMIT" else what if what == "the answer" else f"`{what} …`"
                    )
                    name = f"{done}, before {shown}"
                segments.append((name, t - at))
                previous = what or previous
                at = t
            labels = [f"{k + 1:2d}. {name}" for k, (name, _) in enumerate(segments)]
            if not order:
                order = labels
            if labels != order:
                continue  # not the same sequence (a retry, say): not summed into the phases
            for name, (_, seconds) in zip(labels, segments, strict=True):
                series.setdefault(name, []).append(seconds)
            series.setdefault("total", []).append(ended - started)
    finally:
        for name, fn in hooks:
            event.remove(engine, name, fn)
    return [[name, len(values), fmt_ms(Stats(name, values).median)] for name, values in series.items()]


def building_blocks(label: str, engine: Any, n: int = 300) -> list[list[object]]:
    """What one short read session, one read on an open session and one commit cost here."""
    from sqlmodel import Session

    from orchestrator.store.db import unit_of_work
    from orchestrator.store.events import add_event
    from orchestrator.store.tables import SagaRow

    def own_session() -> None:
        with Session(engine) as s:
            s.get(SagaRow, "no-such-saga")

    def commit_one() -> None:
        with unit_of_work(engine) as uow:
            add_event(uow.session, saga_id=None, actor="bench", kind="bench", status="bench")

    rows: list[list[object]] = []
    with Session(engine) as open_session:

        def on_open_session() -> None:
            open_session.get(SagaRow, "no-such-saga")
            open_session.expunge_all()

        for name, fn in (
            ("a read (`session.get`) in its own `Session`", own_session),
            ("the same read on an already open `Session`", on_open_session),
            ("a unit of work: insert one event + commit", commit_one),
        ):
            timed_loop([fn] * 30)
            got, _ = timed_loop([fn] * n)
            st = Stats(name, got)
            rows.append([label, name, st.n, fmt_ms(st.median), fmt_ms(st.p99)])
    return rows


def run_database(
    label: str,
    url: str,
    workdir: Path,
    opts: argparse.Namespace,
    blocks: list[list[object]],
    phases: list[list[object]],
) -> list[dict[str, Any]]:
    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings
    from orchestrator.harness.capabilities import ROLE_CAPABILITIES
    from orchestrator.harness.spec import ToolCall, ToolContext, ToolStatus
    from orchestrator.toolpath.engine import Caller
    from sagas.destinations.memory import memory_store
    from sagas.publishing import PublishArgs, publish_key

    app = build_app(
        Settings(
            database_url=url,
            broker_url="inline://",
            secret="bench-secret",
            secret_file=workdir / "secret",
            # Hundreds of reads for one saga: a budget they never reach, still charged on every call.
            saga_budget=10**9,
        )
    )
    destination = f"memory:bench-{uuid.uuid4().hex[:8]}"
    warm = WARM
    counter = Counter(app.engine)
    results: list[dict[str, Any]] = []
    try:
        # -- corpus.read (read only) -------------------------------------------------------
        sid = seed_read_saga(app)
        spec = app.registry.get("corpus.read")
        assert spec is not None and spec.executor is not None
        reader = Caller(actor="researcher", capabilities=ROLE_CAPABILITIES["researcher"], saga_id=sid)
        args = {"saga_id": sid, "source": "overview.md"}
        model = spec.input_model.model_validate(args)

        def read_harness() -> None:
            call = ToolCall(tool="corpus.read", arguments=args, call_id=uuid.uuid4().hex)
            result = app.harness.call(call, reader)
            assert result.status is ToolStatus.OK, result

        def read_bare() -> None:
            ctx = ToolContext(
                saga_id=sid,
                actor="researcher",
                idempotency_key=None,
                call_id=uuid.uuid4().hex,
                arguments=model,
            )
            spec.executor(ctx, model)  # type: ignore[misc]

        # Reference, not a proposal: the same call with the harness's one write (the read's event
        # and budget charge) replaced by nothing, to show what the in-memory path costs on its own.
        harness_store = app.harness.store

        def read_unrecorded() -> None:
            harness_store.record_event = lambda **_: uuid.uuid4().hex  # type: ignore[method-assign]
            try:
                read_harness()
            finally:
                del harness_store.record_event  # the class's method again

        n = opts.n_read + warm
        variants: list[Variant] = [
            ("bare executor", [read_bare] * n),
            ("harness", [read_harness] * n),
            (UNRECORDED, [read_unrecorded] * n),
        ]
        results += measure(label, "corpus.read (read only)", variants, warm, counter)

        # -- publish (high risk) to memory:, fresh saga + approval + key per call -----------
        pub = app.registry.get("publish")
        assert pub is not None and pub.executor is not None
        n = opts.n_publish + warm
        sagas = seed_publish_sagas(app, 2 * n, destination)

        def publish_harness(sid: str, digest: str) -> Callable[[], None]:
            caller = Caller(actor="publisher", capabilities=ROLE_CAPABILITIES["publisher"], saga_id=sid)
            call = ToolCall(
                tool="publish",
                arguments={"saga_id": sid, "destination": destination, "version_digest": digest},
                call_id=uuid.uuid4().hex,
            )

            def go() -> None:
                result = app.harness.call(call, caller)
                assert result.status is ToolStatus.OK, result

            return go

        def publish_bare(sid: str, digest: str) -> Callable[[], None]:
            model = PublishArgs(saga_id=sid, destination=destination, version_digest=digest)
            ctx = ToolContext(
                saga_id=sid,
                actor="publisher",
                idempotency_key=publish_key(model),
                call_id=uuid.uuid4().hex,
                arguments=model,
            )

            def go() -> None:
                pub.executor(ctx, model)  # type: ignore[misc]

            return go

        store = memory_store(destination.split(":", 1)[1])
        before = store.effects
        variants = [
            ("bare executor", [publish_bare(*sg) for sg in sagas[:n]]),
            ("harness", [publish_harness(*sg) for sg in sagas[n:]]),
        ]
        results += measure(label, "publish (high risk, memory:)", variants, warm, counter)
        assert store.effects - before == len(sagas), "every publish applied exactly once"
        if label == "PostgreSQL":
            extra = seed_publish_sagas(app, opts.n_publish + warm, destination)
            phases.extend(publish_phases(app.engine, [publish_harness(*sg) for sg in extra], warm))
        blocks.extend(building_blocks(label, app.engine))
    finally:
        app.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-read", type=int, default=400, help="corpus.read calls per path and database")
    parser.add_argument("--n-publish", type=int, default=300, help="publish calls per path and database")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    parser.add_argument("--no-dbos", action="store_true", help="skip DBOS even when it is installed")
    parser.add_argument(
        "--dbos-workflows", type=int, default=200, help="workflows (5 steps each) per DBOS run"
    )
    opts = parser.parse_args()
    use_dbos = dbos_available() and not opts.no_dbos
    dbos: list[dict[str, Any]] = []

    def dbos_step() -> None:
        if use_dbos:
            dbos.append(run_dbos("--latency", "--workflows", str(opts.dbos_workflows), "--warmup", "20"))

    workdir = Path(tempfile.mkdtemp(prefix="bench-harness-"))
    results: list[dict[str, Any]] = []
    blocks: list[list[object]] = []
    phases: list[list[object]] = []
    started = time.monotonic()
    load = os.getloadavg()[0]
    try:
        path = workdir / "bench.db"
        results += run_database("SQLite", f"sqlite:///{path}", workdir, opts, blocks, phases)
        dbos_step()
        with pg_database("pressroom_bench_harness") as url:
            results += run_database("PostgreSQL", url, workdir, opts, blocks, phases)
        dbos_step()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started

    rows = []
    bare: dict[str, Any] = {}
    for r in results:
        st = r["stats"]
        rate = st.n / r["wall"]
        if r["path"] == "bare executor":
            bare = {"rate": rate, "median": st.median}
        rows.append(
            [
                r["db"],
                r["tool"],
                r["path"],
                st.n,
                f"{rate:.0f}",
                fmt_ms(st.median),
                fmt_ms(st.p99),
                fmt_x(ratio(bare["rate"], rate)),
                fmt_x(ratio(st.median, bare["median"])),
                f"{r['statements']:.1f}",
                f"{r['checkouts']:.1f}",
            ]
        )
    out = table(
        [
            "database",
            "tool",
            "path",
            "n",
            "calls/s",
            "median ms",
            "p99 ms",
            "slowdown (calls/s)",
            "median ratio",
            "SQL statements / call",
            "connections / call",
        ],
        rows,
    )
    blocks_table = table(["database", "building block", "n", "median ms", "p99 ms"], blocks)
    phases_table = table(["PostgreSQL: one harness `publish`, in order", "n", "median ms"], phases)
    against = dbos_table(results, dbos)
    print(out)
    print()
    print(blocks_table)
    print()
    print(phases_table)
    if against:
        print()
        print(against)
    if opts.no_write:
        return
    body = f"""Command: `{command_line()}` ({stamp()}, code at {git_rev()}; total {seconds:.0f} s; 1-minute load
average {load:.2f} at the start — the machine is shared, other people's test runs may overlap).

Sequential calls from one thread, tracing off, `inline://` broker (no messages are involved). SQLite is
a file in a temporary folder (WAL, `synchronous=NORMAL`, as shipped); PostgreSQL a fresh local database.
*harness* is `Harness.call(ToolCall, Caller)`; *bare executor* is `spec.executor(ctx, model)` of the same
tool with the input model built outside the timing. `corpus.read` (read only) reads `overview.md` of the
sample corpus for one saga (the executor takes the saga's brief and corpus folder, read from the
database once per process since they never change, reads the file through the corpus index and screens
it; so after the first call the bare read runs no SQL). `publish` (high risk) goes to a `memory:` destination; every call has its own pre-seeded saga (approved, one
version, a valid approval bound to it), so each call has a fresh business key, consumes a fresh approval
and nothing is replayed — the harness adds the ledger and approval lookups, the HMAC check, the
pre-execute transaction (approval consumed, hash-chained checkpoint, ledger `pending`, intent event) and
the record transaction (ledger `done`, result event, step receipt, saga `approved → executing`). The bare
`publish` calls use other sagas seeded the same way. Calls/s is n over the loop's wall time; the paths
run in alternating blocks of 50 calls; *slowdown* is bare calls/s ÷ path calls/s and *median ratio* the
path's median ÷ the bare median (1.00× for the baseline). *{UNRECORDED}* is a reference, not a
proposal: the same `Harness.call` with the store's `record_event` (the read's one transaction: its event
and its budget charge) swapped for a function that returns an id, so what is left is the in-memory path
— bounded parse, schema, capabilities and policy, the executor, the phase spans (tracing off) and the
answer.

*SQL statements / call* and *connections / call* are counted with SQLAlchemy events on the app's engine
(`before_cursor_execute`: on SQLite this includes the explicit `BEGIN`; a connection is a pool checkout —
both engines are pooled, SQLite's connections keep their PRAGMAs and the WAL stays open between
sessions; PostgreSQL's pool has no pre-ping: a checkout is a connection taken from the pool, no round trip).

{out}

What the pieces cost on the same engines (measured after the calls above, 300 samples each):

{blocks_table}

Where one harness `publish` on PostgreSQL spends its wall time, in order: a pass of its own after the calls
above, on {opts.n_publish} fresh sagas after {WARM} warm-up calls, stamped with SQLAlchemy's
`before_cursor_execute`, `after_cursor_execute` and `commit` events on the app's engine (so *sent → result*
is the driver's execute: the round trip and the server's work; a transaction's `BEGIN` is a round trip of
its own inside its first statement's execute; the `commit` event fires just before the driver's commit, so the row after it holds the
commit's round trip and WAL flush, then the Python up to the next statement; row 1 includes the pool checkout).
Medians of each row, so the rows need not add up to the total's median exactly:

{phases_table}
"""
    if against:
        body += f"""
Against a DBOS Transact step (no-op, its checkpoint committed to the same PostgreSQL server; median
of each run, before and after the PostgreSQL calls above; goal of issue 16: a high-risk call ≤ 1.5× a
DBOS step):

{against}
"""
    write_section(TITLE, body)
    print(f"\nwrote section '## {TITLE}' of docs/benchmarks.md")


def dbos_table(results: list[dict[str, Any]], dbos: list[dict[str, Any]]) -> str:
    """PostgreSQL medians beside the DBOS step's (mean of the runs' medians): empty without DBOS."""
    if not dbos:
        return ""
    step = sum(float(d["median_ms"]) for d in dbos) / len(dbos) / 1000
    runs = ", ".join(f"{float(d['median_ms']):.2f} ms (p99 {float(d['p99_ms']):.2f})" for d in dbos)
    rows: list[list[object]] = [["DBOS step", "–", runs, "1.00×"]]
    for r in results:
        if r["db"] == "PostgreSQL":
            rows.append(
                [r["tool"], r["path"], fmt_ms(r["stats"].median), fmt_x(ratio(r["stats"].median, step))]
            )
    return table(["tool", "path", "median ms", "÷ DBOS step median"], rows)


if __name__ == "__main__":
    main()

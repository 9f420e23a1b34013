"""End-to-end throughput: sagas in a burst through the relay and two worker processes.

    .venv/bin/python bench/e2e_throughput.py [--sagas 100] [--mixes site,webhook,mixed]
        [--webhook-delay 0.5] [--dbos-workflows 600] [--no-dbos] [--no-write]
        [--pool threads|prefork|solo] [--concurrency N] [--rounds 1]

Setup: a redis-server of the run's own on a free port (or `BENCH_REDIS_URL`,
flushed, when set) and a fresh PostgreSQL database on
the shared server (`BENCH_DATABASE_URL`'s server, dropped at the end), tracing
off. Processes, all started by this script as the shipped CLI: `pressroom
relay` and `pressroom worker` (its default pools unless `--pool` and
`--concurrency` are given), which with no `--queues` is two worker processes:
the role queues (researcher, writer, reviewer) in one process on a threads
pool of 4, and the publisher in a process of its own on its threads pool of
16. The bench process submits and approves through `orchestrator.services`
(the calls the CLI and the API make), as `dana` and `erin`.

Per mix, after a warm-up of `--warmup` sagas (not counted), `--sagas` sagas
are submitted back to back on the sample corpus; a thread approves each one as
soon as it is `ready-for-review`. Mixes:

* `site`: every saga publishes to its own `site:` folder;
* `webhook`: every saga publishes to its `site:` folder and to one webhook
  that answers each POST after `--webhook-delay` seconds (a threaded HTTP
  server in this process, `tests/support/webhook_server.WebhookServer` in
  `stall` mode, speaking the webhook protocol);
* `mixed`: even-numbered sagas as `site`, odd-numbered as `webhook`.

Figures (from the database's own timestamps, one clock on one machine):
sagas/s and durable steps/s are counted over the burst's wall time, from the
first saga's submit to the last saga's final state. A *durable step* is a
tool call whose result was committed (`tool_call` events: every call of every
role and every publish) plus a handoff committed by its consumer (`message
applied` events, one per role task); a site-only saga has 14 (10 tool calls,
4 handoffs). submit→ready is `ready_at − created_at` of the saga,
approve→succeeded the saga's final `updated_at` − its approval's
`issued_at`. CPU per saga is user + system time over the burst, read from
/proc, of the relay and worker processes (and their children), of the
PostgreSQL backends serving the bench database, and of this process (the
submitting and approving client), divided by the sagas; Redis is a shared
server and is left out. *Deliveries deferred* counts `message deferred`
events: a publish delivery that found its destination at
`PRESSROOM_DESTINATION_CONCURRENCY` and was parked (sent again when a call
to it ended), or one whose key another call held.

With the optional `bench` extra installed (DBOS Transact), DBOS's 5-step
no-op workflow runs at 20 threads on a fresh database of the same server
(`bench/_dbos_noop.py`, in its own process) before the first mix and after
the last, and Pressroom's durable steps/s are printed beside the mean of the
two as a ratio.

`--rounds N` runs the mixes N times over (every mix of `--mixes` in order,
then all of them again), with a DBOS run before each round and one after
the last, so that a loaded minute on a shared machine falls on one round,
not on one side of a comparison. Each round's ratios are taken within the round (its mixes, and
the DBOS runs on either side of it); a goal's verdict is on the median of
the rounds' ratios, and every round's figure is printed beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    REDIS_URL,
    ROOT,
    bench_env,
    command_line,
    dbos_available,
    flush_redis,
    git_rev,
    percentile,
    pg_database,
    run_dbos,
    stamp,
    table,
    write_section,
)

TITLE = "End-to-end throughput: relay + 2 worker processes"
PRESSROOM = str(Path(sys.executable).parent / "pressroom")
CORPUS = ROOT / "roles" / "sample_corpus"
BRIEF = "history of the library network"
TERMINAL = ("succeeded", "failed", "effect-unknown", "cancelled")
CLK = os.sysconf("SC_CLK_TCK")

# Goals of issue 16 (benchmarks, not tests).
GOAL_DBOS = 1.0
GOAL_WEBHOOK_THROUGHPUT = 0.8
GOAL_LOCAL_LATENCY = 1.5


# -- processes and CPU ----------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process, in seconds (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


def descendants(roots: list[int]) -> set[int]:
    """`roots` and every process below them."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


@dataclass
class CpuSnapshot:
    by_pid: dict[int, float] = field(default_factory=dict)


class CpuMeter:
    """CPU of groups of processes between two snapshots (processes alive at the end: one that
    exited in between, such as a database backend of a closed connection, is not counted)."""

    def __init__(self, groups: dict[str, Any]) -> None:
        self.groups = groups  # name -> callable returning the pids of the group now

    def snapshot(self) -> dict[str, dict[int, float]]:
        return {name: {pid: cpu_seconds(pid) for pid in pids()} for name, pids in self.groups.items()}

    @staticmethod
    def delta(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, now in after.items():
            then = before.get(name, {})
            out[name] = sum(max(0.0, cpu - then.get(pid, 0.0)) for pid, cpu in now.items())
        return out


# -- one mix ----------------------------------------------------------------------------------


@dataclass
class MixResult:
    mix: str
    sagas: int
    seconds: float
    states: dict[str, int]
    steps: int
    tool_calls: int
    handoffs: int
    submit_ready: list[float]
    approve_done: list[float]
    approve_done_local: list[float]
    cpu: dict[str, float]
    submit_call: list[float]
    deferred: int = 0
    round: int = 1

    @property
    def sagas_per_s(self) -> float:
        return self.sagas / self.seconds

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds


class Bench:
    def __init__(self, db_url: str, broker_url: str, workdir: Path, opts: argparse.Namespace) -> None:
        from orchestrator.bootstrap import build_app
        from orchestrator.core.config import Settings

        self.db_url = db_url
        self.workdir = workdir
        self.opts = opts
        self.env = bench_env(
            PRESSROOM_DATABASE_URL=db_url,
            PRESSROOM_BROKER_URL=broker_url,
            PRESSROOM_SECRET="bench-secret",
            PRESSROOM_WEBHOOK_ALLOW="127.0.0.1",  # the bench's webhook listens on loopback
        )
        self.settings = Settings(
            database_url=db_url, broker_url=broker_url, secret="bench-secret", webhook_allow="127.0.0.1"
        )
        self.app = build_app(self.settings)  # the schema exists before any process starts
        self.corpus = workdir / "corpus"
        shutil.copytree(CORPUS, self.corpus)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.counter = 0
        self.dbname = db_url.rsplit("/", 1)[1]

    # processes
    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [PRESSROOM, *args], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        import signal

        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def pg_backends(self) -> list[int]:
        from sqlalchemy import text

        with self.app.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT pid FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid()"),
                {"d": self.dbname},
            ).all()
        return [int(r[0]) for r in rows]

    # sagas
    def destinations(self, mix: str, i: int, hook_url: str) -> list[str]:
        self.counter += 1
        site = f"site:{self.workdir / 'sites' / f'saga-{self.counter}'}"
        if mix == "site" or (mix == "mixed" and i % 2 == 0):
            return [site]
        return [site, f"webhook:{hook_url}"]

    def run_sagas(self, mix: str, n: int, hook_url: str) -> tuple[list[str], list[bool], list[float], float]:
        """Submit `n` sagas back to back, approve each when ready; wait for all to finish."""
        from sqlalchemy import text

        ids: list[str] = []
        local: list[bool] = []
        submit_call: list[float] = []
        approved: set[str] = set()
        done = threading.Event()
        errors: list[BaseException] = []

        def approver() -> None:
            try:
                while not done.is_set():
                    with self.app.engine.connect() as conn:
                        ready = conn.execute(
                            text("SELECT id, head_version FROM sagas WHERE state = 'ready-for-review'")
                        ).all()
                    mine = [(sid, v) for sid, v in ready if sid in wanted and sid not in approved]
                    for sid, version in mine:
                        self.app.reviews.approve(sid, version=int(version), actor="erin")
                        approved.add(sid)
                    if not mine:
                        time.sleep(0.02)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        wanted: set[str] = set()
        thread = threading.Thread(target=approver, name="approver", daemon=True)
        thread.start()
        started = time.time()
        try:
            for i in range(n):
                dests = self.destinations(mix, i, hook_url)
                t = time.perf_counter()
                out = self.app.submissions.submit(
                    brief=BRIEF, corpus=str(self.corpus), destinations=dests, actor="dana"
                )
                submit_call.append(time.perf_counter() - t)
                ids.append(out["saga_id"])
                wanted.add(out["saga_id"])
                local.append(len(dests) == 1)
            deadline = time.monotonic() + self.opts.timeout
            while time.monotonic() < deadline and not errors:
                with self.app.engine.connect() as conn:
                    finished = conn.execute(
                        text("SELECT count(*) FROM sagas WHERE id = ANY(:ids) AND state = ANY(:t)"),
                        {"ids": ids, "t": list(TERMINAL)},
                    ).scalar_one()
                if finished == len(ids):
                    break
                time.sleep(0.1)
            else:
                if errors:
                    raise errors[0]
                raise TimeoutError(f"{mix}: not every saga finished within {self.opts.timeout} s")
        finally:
            done.set()
            thread.join(timeout=30)
        return ids, local, submit_call, started

    def figures(self, mix: str, ids: list[str], local: list[bool]) -> dict[str, Any]:
        from sqlalchemy import text

        with self.app.engine.connect() as conn:
            sagas = {
                r.id: r
                for r in conn.execute(
                    text(
                        "SELECT id, state, created_at, ready_at, updated_at FROM sagas WHERE id = ANY(:ids)"
                    ),
                    {"ids": ids},
                ).all()
            }
            issued = dict(
                conn.execute(
                    text(
                        "SELECT saga_id, min(issued_at) FROM approvals WHERE saga_id = ANY(:ids) GROUP BY saga_id"
                    ),
                    {"ids": ids},
                ).all()
            )
            counts = {
                (kind, status): n
                for kind, status, n in conn.execute(
                    text(
                        "SELECT kind, CASE WHEN kind = 'message' THEN status END, count(*) FROM events "
                        "WHERE saga_id = ANY(:ids) AND (kind = 'tool_call' OR "
                        "(kind = 'message' AND status IN ('applied', 'deferred'))) GROUP BY 1, 2"
                    ),
                    {"ids": ids},
                ).all()
            }
        states: dict[str, int] = {}
        for row in sagas.values():
            states[row.state] = states.get(row.state, 0) + 1
        first = min(r.created_at for r in sagas.values())
        last = max(r.updated_at for r in sagas.values())
        submit_ready = [(r.ready_at - r.created_at).total_seconds() for r in sagas.values() if r.ready_at]
        approve_done = {
            sid: (sagas[sid].updated_at - issued[sid]).total_seconds()
            for sid in ids
            if sid in issued and sagas[sid].state == "succeeded"
        }
        local_ids = {sid for sid, is_local in zip(ids, local, strict=True) if is_local}
        return {
            "seconds": (last - first).total_seconds(),
            "states": states,
            "tool_calls": int(counts.get(("tool_call", None), 0)),
            "handoffs": int(counts.get(("message", "applied"), 0)),
            # Deliveries that ended without their result: parked at a destination at its limit, or a key in flight.
            "deferred": int(counts.get(("message", "deferred"), 0)),
            "submit_ready": submit_ready,
            "approve_done": list(approve_done.values()),
            "approve_done_local": [v for sid, v in approve_done.items() if sid in local_ids],
        }

    def mix(self, mix: str, hook_url: str, meter: CpuMeter, round: int = 1) -> MixResult:
        self.run_sagas(mix, self.opts.warmup, hook_url)  # warm: imports, corpus index, pools
        before = meter.snapshot()
        ids, local, submit_call, _ = self.run_sagas(mix, self.opts.sagas, hook_url)
        cpu = CpuMeter.delta(before, meter.snapshot())
        f = self.figures(mix, ids, local)
        return MixResult(
            mix=mix,
            sagas=len(ids),
            seconds=f["seconds"],
            states=f["states"],
            steps=f["tool_calls"] + f["handoffs"],
            tool_calls=f["tool_calls"],
            handoffs=f["handoffs"],
            submit_ready=f["submit_ready"],
            approve_done=f["approve_done"],
            approve_done_local=f["approve_done_local"],
            cpu=cpu,
            submit_call=submit_call,
            deferred=f["deferred"],
            round=round,
        )


# -- DBOS ---------------------------------------------------------------------------------------


# -- the report -----------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    value = seconds * 1000
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p99(values: list[float]) -> float:
    return percentile(values, 99) if values else float("nan")


def report(
    results: list[MixResult], dbos: list[dict[str, Any]], opts: argparse.Namespace, meta: dict[str, Any]
) -> str:
    rounds = sorted({r.round for r in results})
    several = len(rounds) > 1
    headers = [
        *(["round"] if several else []),
        "mix",
        "sagas",
        "final states",
        "burst s",
        "sagas/s",
        "durable steps (tool calls + handoffs)",
        "steps/s",
        "submit→ready p50 / p99 ms",
        "approve→succeeded p50 / p99 ms",
        "site-only sagas: approve→succeeded p50 / p99 ms",
        "deliveries deferred",
        "CPU ms / saga (workers + relay / PostgreSQL / bench client)",
    ]
    rows = []
    for r in results:
        cpu = r.cpu
        procs = cpu.get("workers", 0.0) + cpu.get("relay", 0.0)
        rows.append(
            [
                *([r.round] if several else []),
                r.mix,
                r.sagas,
                ", ".join(f"{k} {v}" for k, v in sorted(r.states.items())),
                f"{r.seconds:.1f}",
                f"{r.sagas_per_s:.1f}",
                f"{r.steps:,} ({r.tool_calls:,} + {r.handoffs:,})",
                f"{r.steps_per_s:.0f}",
                f"{ms(p50(r.submit_ready))} / {ms(p99(r.submit_ready))}",
                f"{ms(p50(r.approve_done))} / {ms(p99(r.approve_done))}",
                f"{ms(p50(r.approve_done_local))} / {ms(p99(r.approve_done_local))}"
                if r.approve_done_local
                else "–",
                f"{r.deferred:,}",
                f"{ms(procs / r.sagas)} / {ms(cpu.get('postgres', 0.0) / r.sagas)} / "
                f"{ms(cpu.get('bench', 0.0) / r.sagas)}",
            ]
        )
    text = table(headers, rows)
    by_round = {n: {r.mix: r for r in results if r.round == n} for n in rounds}
    goals: list[tuple[str, list[float], float, str, bool]] = []
    if dbos:
        steps = statistics.mean(d["steps_per_s"] for d in dbos)
        wf = statistics.mean(d["workflows_per_s"] for d in dbos)
        runs = ", ".join(
            f"{d['workflows_per_s']:.1f} workflows/s = {d['steps_per_s']:.0f} steps/s" for d in dbos
        )
        when = (
            "before each round and after the last" if several else "before the first mix and after the last"
        )
        text += (
            f"\n\nDBOS Transact {meta.get('dbos_version', '?')}, 5-step no-op workflow, 20 threads,"
            f" {dbos[0]['workflows']} workflows per run on a fresh database of the same PostgreSQL server"
            f" (`bench/_dbos_noop.py`), {when}: {runs};"
            f" mean {wf:.1f} workflows/s = {steps:.0f} durable steps/s."
        )
        beside = {n: dbos_beside(dbos, i) for i, n in enumerate(rounds)}
        ratio_rows = [
            [
                *([r.round] if several else []),
                r.mix,
                f"{r.steps_per_s:.0f}",
                f"{beside[r.round]:.0f}",
                f"{r.steps_per_s / beside[r.round]:.2f}×",
            ]
            for r in results
        ]
        dbos_head = "DBOS steps/s (mean of the runs on either side)" if several else "DBOS steps/s (mean)"
        text += "\n\n" + table(
            [*(["round"] if several else []), "mix", "Pressroom steps/s", dbos_head, "Pressroom ÷ DBOS"],
            ratio_rows,
        )
        ratios = [m["site"].steps_per_s / beside[n] for n, m in by_round.items() if "site" in m]
        if ratios:
            what = f"Durable steps/s end to end ≥ {GOAL_DBOS}× DBOS's no-op steps/s (site-only)"
            goals.append((what, ratios, GOAL_DBOS, "×", False))
    elif opts.no_dbos:
        text += "\n\nDBOS Transact was not run (`--no-dbos`): no comparison in this run."
    else:
        text += "\n\nDBOS Transact is not installed (`pip install -e '.[bench]'`): no comparison in this run."
    pairs = [(m["site"], m["mixed"]) for m in by_round.values() if "site" in m and "mixed" in m]
    if pairs:
        goals.append(
            (
                f"With one {opts.webhook_delay} s webhook in the mix, throughput ≥ {GOAL_WEBHOOK_THROUGHPUT}× site-only",
                [mixed.sagas_per_s / site.sagas_per_s for site, mixed in pairs],
                GOAL_WEBHOOK_THROUGHPUT,
                "×",
                False,
            )
        )
        local = [
            p50(mixed.approve_done_local) / p50(site.approve_done)
            for site, mixed in pairs
            if mixed.approve_done_local and site.approve_done
        ]
        if local:
            goals.append(
                (
                    f"Site-only sagas' approve→succeeded p50 in the mixed run within {GOAL_LOCAL_LATENCY}× of the site-only run",
                    local,
                    GOAL_LOCAL_LATENCY,
                    "×",
                    True,
                )
            )
    lines = [
        goal_line(what, got, goal, unit, lower_is_better=lower) for what, got, goal, unit, lower in goals
    ]
    hooked = [
        m["webhook"].sagas_per_s / m["site"].sagas_per_s
        for m in by_round.values()
        if {"site", "webhook"} <= set(m)
    ]
    if hooked:
        lines.append(
            f"- Every saga with the webhook (not a goal of the issue, shown for scale): "
            f"{', '.join(f'{x:.2f}×' for x in hooked)} the site-only throughput."
        )
    return text + "\n\n" + "\n".join(lines)


def dbos_beside(dbos: list[dict[str, Any]], index: int) -> float:
    """DBOS's steps/s beside round `index` (0-based): the mean of the runs just before and just
    after it (one run before each round and one after the last), or of what there is."""
    near = dbos[index : index + 2] or dbos
    return float(statistics.mean(d["steps_per_s"] for d in near))


def goal_line(
    what: str, got: float | list[float], goal: float, unit: str, *, lower_is_better: bool = False
) -> str:
    """A goal's verdict; over several rounds, on their median, with every round's figure."""
    values = got if isinstance(got, list) else [got]
    value = statistics.median(values)

    def met(x: float) -> bool:
        return x <= goal if lower_is_better else x >= goal

    rounds = ""
    if len(values) > 1:
        listed = ", ".join(f"{x:.2f}{unit}" for x in values)
        rounds = (
            f" (median of {len(values)} rounds: {listed}; met in {sum(map(met, values))} of {len(values)})"
        )
    if met(value):
        return f"- {what}: {value:.2f}{unit}{rounds}, **met**."
    by = value - goal if lower_is_better else goal - value
    side = "over" if lower_is_better else "short"
    return f"- {what}: {value:.2f}{unit}{rounds}, **NOT met** ({by:.2f}{unit} {side})."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sagas", type=int, default=100, help="sagas per mix, in one burst")
    parser.add_argument("--warmup", type=int, default=3, help="sagas through before each mix, not counted")
    parser.add_argument("--mixes", default="site,webhook,mixed")
    parser.add_argument(
        "--webhook-delay", type=float, default=0.5, help="seconds the webhook takes to answer"
    )
    parser.add_argument("--dbos-workflows", type=int, default=600)
    parser.add_argument("--no-dbos", action="store_true", help="skip DBOS even when it is installed")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a burst may take")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    parser.add_argument(
        "--pool", default=None, help="the role queues' worker pool (default: the CLI's, threads)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="the role queues' worker concurrency (default: the CLI's)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the mixes this many times over, interleaved"
    )
    opts = parser.parse_args()
    if opts.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    mixes = [m.strip() for m in opts.mixes.split(",") if m.strip()]
    unknown = [m for m in mixes if m not in ("site", "webhook", "mixed")]
    if unknown:
        raise SystemExit(f"unknown mix(es) {unknown}; known: site, webhook, mixed")

    from tests.support.webhook_server import WebhookServer

    started = time.monotonic()
    load = os.getloadavg()
    meta: dict[str, Any] = {}
    use_dbos = dbos_available() and not opts.no_dbos
    dbos: list[dict[str, Any]] = []
    if use_dbos:
        from importlib.metadata import version

        meta["dbos_version"] = version("dbos")
        dbos.append(run_dbos("--workflows", str(opts.dbos_workflows)))
    workdir = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    results: list[MixResult] = []
    with (
        broker(workdir) as broker_url,
        pg_database("pressroom_bench_e2e") as db_url,
        WebhookServer("stall", stall_seconds=opts.webhook_delay) as hook,
    ):
        meta["broker_kind"] = (
            "`BENCH_REDIS_URL`, flushed"
            if os.environ.get("BENCH_REDIS_URL")
            else "a redis-server of the run's own on a free port"
        )
        bench = Bench(db_url, broker_url, workdir, opts)
        try:
            relay = bench.start("relay", "relay")
            sizing = ["--concurrency", str(opts.concurrency)] if opts.concurrency else []
            pool = ["--pool", opts.pool] if opts.pool else []
            worker = bench.start("worker", "worker", *pool, *sizing, "--loglevel", "WARNING")
            me = os.getpid()
            meter = CpuMeter(
                {
                    "relay": lambda: descendants([relay.pid]),
                    "workers": lambda: descendants([worker.pid]),
                    "postgres": bench.pg_backends,
                    "bench": lambda: [me],
                }
            )
            for n in range(1, opts.rounds + 1):
                if use_dbos and n > 1:
                    dbos.append(run_dbos("--workflows", str(opts.dbos_workflows)))
                for mix in mixes:
                    print(f"round {n}, mix {mix}: {opts.sagas} sagas …", flush=True)
                    results.append(bench.mix(mix, hook.url, meter, round=n))
                    r = results[-1]
                    print(
                        f"  {r.sagas_per_s:.1f} sagas/s, {r.steps_per_s:.0f} steps/s, {r.states}", flush=True
                    )
            meta["worker_processes"] = len(descendants([worker.pid]))
        except Exception:
            for log in sorted(workdir.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}", file=sys.stderr)
            raise
        finally:
            bench.stop_all()
    if use_dbos:
        dbos.append(run_dbos("--workflows", str(opts.dbos_workflows)))
    shutil.rmtree(workdir, ignore_errors=True)
    body = report(results, dbos, opts, meta)
    print(body)
    if opts.no_write:
        return
    end_load = os.getloadavg()
    header = (
        f"Command: `{command_line()}` ({stamp()}, code at {git_rev()}; whole script"
        f" {time.monotonic() - started:.0f} s; 1-minute load average {load[0]:.1f} at the start and"
        f" {end_load[0]:.1f} at the end on {os.cpu_count()} CPUs — the machine is shared, other people's"
        f" test runs overlap).\n\n"
        f"{explain(opts, meta)}\n\n"
    )
    write_section(TITLE, header + body)
    print(f"\nwrote section '## {TITLE}' of docs/benchmarks.md")


@contextlib.contextmanager
def broker(workdir: Path) -> Iterator[str]:
    """`BENCH_REDIS_URL` (flushed) when set; else a redis-server of this run's own on a free port, so
    that no other process (a run before this one, a test suite) takes this run's messages."""
    if os.environ.get("BENCH_REDIS_URL"):
        flush_redis(REDIS_URL)
        yield REDIS_URL
        flush_redis(REDIS_URL)
        return
    from tests.support.processes import redis_server
    from tests.support.web import free_port

    port = free_port()
    with redis_server(port, workdir):
        yield f"redis://127.0.0.1:{port}/0"


def explain(opts: argparse.Namespace, meta: dict[str, Any]) -> str:
    from orchestrator.core.config import Settings
    from orchestrator.entrypoints.processes import sized_settings
    from orchestrator.entrypoints.worker_pools import PUBLISHER_CONCURRENCY, PUBLISHER_POOL, ROLE_CONCURRENCY

    # The limit the publisher child works out for itself (the bench sets no PRESSROOM_ variable).
    defaults = Settings.model_construct()
    limit = sized_settings(defaults, PUBLISHER_POOL, PUBLISHER_CONCURRENCY).destination_concurrency
    flags = " ".join(
        [f"--pool {opts.pool}"] * bool(opts.pool)
        + [f"--concurrency {opts.concurrency}"] * bool(opts.concurrency)
    )
    roles = (
        f"researcher, writer and reviewer in one process (`{flags}`)"
        if flags
        else f"researcher, writer and reviewer in one process on its default threads pool of {ROLE_CONCURRENCY}"
    )
    return (
        f"Redis broker ({meta.get('broker_kind', 'a redis-server of its own')}) and a fresh database on the local"
        " PostgreSQL server, tracing off. Processes started by the bench with the shipped CLI:"
        f" `pressroom relay` and `pressroom worker{' ' + flags if flags else ''}`, which without `--queues` is"
        f" two worker processes — {roles}, the publisher in its own on its default threads pool of"
        f" {PUBLISHER_CONCURRENCY}, at most {limit} calls to one destination at once"
        f" ({meta.get('worker_processes', '?')} worker processes counted under it at the"
        f" end). The bench process submits {opts.sagas} sagas per mix back to back through"
        " `Submissions.submit` (sample corpus) and a thread approves each as soon as it is `ready-for-review`"
        f" (`Reviews.approve`), after {opts.warmup} warm-up sagas per mix. *site*: one `site:` folder per"
        f" saga; *webhook*: that folder and one webhook answering each POST after {opts.webhook_delay} s"
        " (`WebhookServer` in `stall` mode, threaded, in the bench process); *mixed*: even sagas site-only,"
        " odd sagas with the webhook. The burst runs from the first saga's `created_at` to the last"
        " saga's final `updated_at`. A durable step is a committed tool call (`tool_call` event) or a"
        " committed handoff (`message applied` event); submit→ready is `ready_at − created_at`,"
        " approve→succeeded the final `updated_at` − the approval's `issued_at`. CPU per saga:"
        " user + system time from /proc over the burst (workers and relay with their children; the"
        " PostgreSQL backends of the bench database that are alive at the end (a backend that exits during"
        " the burst is not counted: the workers' pools keep theirs open); the bench process, which submits and approves), over"
        " the sagas; the shared Redis server is not counted. See the module docstring of"
        " `bench/e2e_throughput.py`."
    )


if __name__ == "__main__":
    main()

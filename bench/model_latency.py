"""Model latency: sagas in a burst whose three roles wait on a slow model, against the same
burst with no model.

    .venv/bin/python bench/model_latency.py [--sagas 200] [--latency 1.0] [--no-write]

Setup: the README's topology as real processes, all started by this script with
the shipped CLI: `pressroom relay`, one `pressroom worker --queues Q` per role
queue (researcher, writer, reviewer; each on its default threads pool of 4) and
`pressroom worker --queues publisher` (its threads pool of 16), on Redis
(`BENCH_REDIS_URL`, db 9 by default, flushed before and after) and a fresh
PostgreSQL database on `BENCH_DATABASE_URL`'s server (dropped at the end),
tracing off. The model is `evaluation.scripted_model` (script `faithful`) in a
process of its own, answering each chat completion after `--latency` seconds
and counting the requests in flight.

Two pipelines, written to a pipelines folder of the run's own
(`tests/support/model_pipelines.py`): `modelled`, research → draft → check
with every role's `planner` the `[model.house]` profile on the scripted server,
and `plain`, the same three roles on the deterministic planner. Each runs 3
warm-up sagas (not counted), then `--sagas` sagas submitted back to back through
`Submissions.submit` in this process (sample corpus, one `site:` folder); no
saga is approved, the burst ends when the last reaches `ready-for-review`.
The plain burst runs first, the modelled one right after it: the same-run
baseline.

Figures: sagas/s over the burst (the first saga's `created_at` to the last
`ready_at`, the database's clock); submit→ready p50 / p99 (`ready_at −
created_at`, nearest rank); the peak of requests in flight at the model server
(its own counter, reset after the warm-up); the peak PostgreSQL connections to
the bench database, sampled every 0.2 s from `pg_stat_activity` (each process
connects under its own `application_name`, through `PGAPPNAME`, so the
Pressroom processes are counted apart from this script's); and the peak
`Threads:` of each worker process, sampled from /proc/PID/status at the same
rate. A sample can miss a peak shorter than 0.2 s. Beside them, the CPU time (user +
system, /proc) of the relay and workers per saga over the burst, and the cores the whole
machine kept busy meanwhile (/proc/stat: other people's work on a shared machine included).
`--model-concurrency N` sets the profile's `concurrency` (calls in flight per worker process),
to see how much of the gap that setting accounts for.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    PG_ADMIN_URL,
    REDIS_URL,
    ROOT,
    bench_env,
    command_line,
    flush_redis,
    git_rev,
    percentile,
    pg_database,
    stamp,
    table,
    write_section,
)
from e2e_throughput import cpu_seconds, descendants

TITLE = "Model latency: role workers waiting on a slow model"
PRESSROOM = str(Path(sys.executable).parent / "pressroom")
CORPUS = ROOT / "roles" / "sample_corpus"
BRIEF = "history of the library network"
QUEUES = ("researcher", "writer", "reviewer", "publisher")
WARMUP = 3
SAMPLE_EVERY = 0.2
ME = "bench"  # this script's application_name (its sampler's is `bench-sampler`)

# Goals of the performance issue (reported against, never asserted).
GOAL_RATIO = 0.8
GOAL_CONNECTIONS = 20
GOAL_THREADS = 64


# -- the scripted model, in a process of its own ---------------------------------------------


@contextmanager
def model_server(latency: float, workdir: Path) -> Iterator[str]:
    """`python -m evaluation.scripted_model` on a free port; its base URL (ends in /v1)."""
    log = (workdir / "model.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaluation.scripted_model", "--latency", str(latency), "--port", "0"],
        env=bench_env(),
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the scripted model did not start: {url!r}")
        wait_for(lambda: model_stats(url) is not None, 15, "the scripted model")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def model_stats(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=5) as resp:
            data: dict[str, Any] = json.load(resp)
            return data
    except OSError:
        return None


def model_reset(url: str) -> None:
    request = urllib.request.Request(url.removesuffix("/v1") + "/stats/reset", method="POST", data=b"")
    urllib.request.urlopen(request, timeout=5).close()


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


# -- the processes ------------------------------------------------------------------------------


class Topology:
    """The relay and one worker per queue, each connecting under its own `application_name`."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env = env
        self.workdir = workdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        self._start("relay", "relay")
        for queue in QUEUES:
            self._start(f"worker-{queue}", "worker", "--queues", queue, "--loglevel", "WARNING")

    def _start(self, name: str, *args: str) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [PRESSROOM, *args],
            env={**self.env, "PGAPPNAME": name},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    def workers(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items() if name.startswith("worker-")}

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
            for log in sorted(self.workdir.glob("*.log"))
        )


def threads_of(pid: int) -> int:
    """`Threads:` of /proc/PID/status (0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat's first line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return float(sum(fields) - idle), float(sum(fields))


def processes_cpu(roots: list[int]) -> dict[int, float]:
    return {pid: cpu_seconds(pid) for pid in descendants(roots)}


class Sampler(threading.Thread):
    """Every SAMPLE_EVERY s: connections to the bench database by application_name, and the
    threads of every worker process (and any process below it); keeps the peaks."""

    def __init__(self, dbname: str, workers: dict[str, int]) -> None:
        super().__init__(name="sampler", daemon=True)
        self.dbname = dbname
        self.workers = workers
        self.stop_event = threading.Event()
        self.peak_total = 0  # Pressroom's processes, summed in one sample
        self.peak_mine = 0  # this script's own connections
        self.peak_by_app: dict[str, int] = {}
        self.peak_threads: dict[str, int] = {}
        self.samples = 0

    def run(self) -> None:
        import psycopg

        plain = PG_ADMIN_URL.replace("postgresql+psycopg", "postgresql").rsplit("/", 1)[0]
        with psycopg.connect(
            f"{plain}/{self.dbname}", autocommit=True, application_name="bench-sampler"
        ) as conn:
            while not self.stop_event.is_set():
                self.sample(conn)
                self.stop_event.wait(SAMPLE_EVERY)

    def sample(self, conn: Any) -> None:
        rows = conn.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = %s GROUP BY 1",
            (self.dbname,),
        ).fetchall()
        counts = {str(app): int(n) for app, n in rows if app != "bench-sampler"}
        mine = counts.pop(ME, 0)
        self.peak_mine = max(self.peak_mine, mine)
        self.peak_total = max(self.peak_total, sum(counts.values()))
        for app, n in counts.items():
            self.peak_by_app[app] = max(self.peak_by_app.get(app, 0), n)
        for name, pid in self.workers.items():
            for one in descendants([pid]):
                self.peak_threads[name] = max(self.peak_threads.get(name, 0), threads_of(one))
        self.samples += 1

    def finish(self) -> Sampler:
        self.stop_event.set()
        self.join(timeout=10)
        return self


# -- one burst ------------------------------------------------------------------------------------


@dataclass
class Burst:
    pipeline: str
    sagas: int
    seconds: float
    states: dict[str, int]
    submit_ready: list[float]
    sampler: Sampler
    model: dict[str, Any] = field(default_factory=dict)
    cpu_s: float = 0.0  # user + system of the relay and workers over the burst
    busy_cores: float = 0.0  # the whole machine's, averaged over the burst

    @property
    def sagas_per_s(self) -> float:
        return self.sagas / self.seconds if self.seconds else float("nan")


class Bench:
    def __init__(self, app: Any, corpus: Path, workdir: Path, timeout: float) -> None:
        self.app = app
        self.corpus = corpus
        self.workdir = workdir
        self.timeout = timeout
        self.dbname = app.settings.database_url.rsplit("/", 1)[1]

    def submit(self, pipeline: str, n: int) -> list[str]:
        """`n` sagas of `pipeline`, back to back; their ids."""
        return [
            str(
                self.app.submissions.submit(
                    brief=BRIEF,
                    corpus=str(self.corpus),
                    destinations=[f"site:{self.workdir / 'site'}"],
                    actor="dana",
                    pipeline=pipeline,
                )["saga_id"]
            )
            for _ in range(n)
        ]

    def wait_settled(self, ids: list[str]) -> None:
        """Until every saga is ready-for-review, or has ended another way."""
        from sqlalchemy import text

        query = text(
            "SELECT count(*) FROM sagas WHERE id = ANY(:ids)"
            " AND state IN ('ready-for-review', 'failed', 'cancelled', 'effect-unknown', 'succeeded')"
        )

        def settled() -> bool:
            with self.app.engine.connect() as conn:
                return int(conn.execute(query, {"ids": ids}).scalar_one()) == len(ids)

        wait_for(settled, self.timeout, f"{len(ids)} sagas to settle")

    def figures(self, ids: list[str]) -> tuple[float, dict[str, int], list[float]]:
        from sqlalchemy import text

        with self.app.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT state, created_at, ready_at FROM sagas WHERE id = ANY(:ids)"), {"ids": ids}
            ).all()
        states: dict[str, int] = {}
        for row in rows:
            states[row.state] = states.get(row.state, 0) + 1
        ready = [r for r in rows if r.ready_at]
        first = min(r.created_at for r in rows)
        last = max((r.ready_at for r in ready), default=first)
        latencies = [(r.ready_at - r.created_at).total_seconds() for r in ready]
        return (last - first).total_seconds(), states, latencies

    def burst(self, pipeline: str, n: int, topology: Topology, model_url: str | None) -> Burst:
        self.wait_settled(self.submit(pipeline, WARMUP))
        if model_url:
            model_reset(model_url)
        sampler = Sampler(self.dbname, topology.workers())
        roots = topology.pids()
        cpu_before, machine_before = processes_cpu(roots), machine_cpu()
        sampler.start()
        try:
            ids = self.submit(pipeline, n)
            self.wait_settled(ids)
        finally:
            sampler.finish()
        cpu_after, machine_after = processes_cpu(roots), machine_cpu()
        seconds, states, latencies = self.figures(ids)
        model = (model_stats(model_url) or {}) if model_url else {}
        burst = Burst(pipeline, n, seconds, states, latencies, sampler, model)
        burst.cpu_s = sum(max(0.0, t - cpu_before.get(pid, 0.0)) for pid, t in cpu_after.items())
        busy = machine_after[0] - machine_before[0]
        burst.busy_cores = busy / (machine_after[1] - machine_before[1]) * (os.cpu_count() or 1)
        return burst


# -- the report -------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def p50(values: list[float]) -> float:
    return percentile(values, 50)


def row(b: Burst, label: str) -> list[str]:
    s = b.sampler
    apps = ", ".join(f"{k.removeprefix('worker-')} {v}" for k, v in sorted(s.peak_by_app.items()))
    threads = ", ".join(f"{k.removeprefix('worker-')} {v}" for k, v in sorted(s.peak_threads.items()))
    model = b.model
    return [
        label,
        str(b.sagas),
        ", ".join(f"{k} {v}" for k, v in sorted(b.states.items())),
        f"{b.seconds:.1f}",
        f"{b.sagas_per_s:.2f}",
        f"{ms(p50(b.submit_ready))} / {ms(percentile(b.submit_ready, 99))}",
        f"{model['peak_in_flight']} ({model['requests']:,} requests)" if model else "–",
        f"{s.peak_total} ({apps}; bench {s.peak_mine})",
        threads,
        f"{b.cpu_s / b.sagas * 1000:.0f} / {b.busy_cores:.1f}",
    ]


def verdict(what: str, ok: bool, detail: str) -> str:
    return f"- {what}: {detail}, **{'met' if ok else 'NOT met'}**."


def report(plain: Burst, modelled: Burst, latency: float, concurrency: int) -> str:
    headers = [
        "pipeline",
        "sagas",
        "states",
        "burst s",
        "sagas/s",
        "submit→ready p50 / p99 ms",
        "model calls in flight, peak",
        "PostgreSQL connections, peak (by process; bench's own)",
        "threads per worker process, peak",
        f"CPU ms / saga (relay + workers) / cores busy (machine, of {os.cpu_count()})",
    ]
    text = table(
        headers,
        [row(plain, "plain (no model)"), row(modelled, f"modelled ({latency:g} s model)")],
    )
    ratio = modelled.sagas_per_s / plain.sagas_per_s
    conns = modelled.sampler.peak_total
    threads = max(modelled.sampler.peak_threads.values(), default=0)
    lines = [
        verdict(
            f"Sagas/s with a {latency:g} s model ≥ {GOAL_RATIO}× the no-model run",
            ratio >= GOAL_RATIO,
            f"{modelled.sagas_per_s:.2f} ÷ {plain.sagas_per_s:.2f} = {ratio:.2f}×"
            + ("" if ratio >= GOAL_RATIO else f" ({GOAL_RATIO - ratio:.2f}× short)"),
        ),
        verdict(
            f"PostgreSQL connections ≤ {GOAL_CONNECTIONS} (Pressroom's processes, modelled run)",
            conns <= GOAL_CONNECTIONS,
            f"peak {conns}" + ("" if conns <= GOAL_CONNECTIONS else f" ({conns - GOAL_CONNECTIONS} over)"),
        ),
        verdict(
            f"Threads per worker process ≤ {GOAL_THREADS} (modelled run)",
            threads <= GOAL_THREADS,
            f"peak {threads}" + ("" if threads <= GOAL_THREADS else f" ({threads - GOAL_THREADS} over)"),
        ),
    ]
    lines += floor_lines(modelled, latency, concurrency)
    lines += [cpu_line(plain, modelled), pool_line(modelled)]
    return text + "\n\n" + "\n".join(lines)


def cpu_line(plain: Burst, modelled: Burst) -> str:
    """How much more CPU a modelled saga costs: on full cores, what holds the ratio down."""
    per_plain = plain.cpu_s / plain.sagas * 1000
    per_model = modelled.cpu_s / modelled.sagas * 1000
    times = per_model / per_plain
    return (
        f"- CPU per saga of the relay and workers, modelled ÷ plain: {per_model:.0f} ÷ {per_plain:.0f} ms ="
        f" {times:.2f}×, with {plain.busy_cores:.1f} and {modelled.busy_cores:.1f} of {os.cpu_count()} cores"
        f" busy on the machine during the two bursts: while the cores are full that alone holds the ratio"
        f" near 1 ÷ {times:.2f} = {1 / times:.2f}×, whatever the model's concurrency (PostgreSQL's CPU not counted)."
    )


def pool_line(modelled: Burst) -> str:
    """The connections each process held against the pool it is sized to."""
    from orchestrator.core.config import Settings
    from orchestrator.entrypoints.processes import sized_settings
    from orchestrator.entrypoints.worker_pools import ROLE_CONCURRENCY, ROLE_POOL
    from orchestrator.store.db import POOL_OVERFLOW

    pool = sized_settings(Settings.model_construct(), ROLE_POOL, ROLE_CONCURRENCY).db_pool_size
    held = ", ".join(
        f"{k.removeprefix('worker-')} {v}" for k, v in sorted(modelled.sampler.peak_by_app.items())
    )
    return (
        f"- Connections held at the peak, by process (modelled run): {held}. Each role process's pool is"
        f" {pool} ({ROLE_CONCURRENCY} threads × 2, and up to {POOL_OVERFLOW} more under load), and a turn waiting on"
        f" the model holds none: the three role processes' pools and the relay come to {3 * pool + 1} before"
        " any overflow, model or no model."
    )


def floor_lines(modelled: Burst, latency: float, concurrency: int) -> list[str]:
    """What the model's calls alone allow: each role's worker process has at most `concurrency`
    calls in flight, so its calls take at least calls × latency ÷ concurrency seconds; and a
    saga's own calls follow one another."""
    by_role: dict[str, int] = modelled.model.get("by_role", {})
    if not by_role:
        return []
    n = modelled.sagas
    per = ", ".join(f"{k} {v / n:.1f}" for k, v in sorted(by_role.items()))
    role, most = max(by_role.items(), key=lambda kv: kv[1])
    floor = most * latency / concurrency
    chain = sum(by_role.values()) / n * latency
    return [
        f"- Model requests per saga by role (the server's count): {per}; {chain:.0f} s of model per saga, one"
        " call after another.",
        f"- At {concurrency} calls in flight per worker process (the profile's `concurrency`), the {role}'s"
        f" {most:,} calls take at least {floor:.1f} s: at most {n / floor:.2f} sagas/s through that process.",
    ]


def explain(opts: argparse.Namespace, plain: Burst, modelled: Burst) -> str:
    return (
        "The README's topology as real processes started with the shipped CLI: `pressroom relay`, one"
        " `pressroom worker --queues Q` each for researcher, writer and reviewer (default threads pool of"
        " 4) and for the publisher (threads pool of 16), on Redis (db 9 of the shared server, flushed) and a"
        " fresh PostgreSQL database, tracing off. The model is `evaluation.scripted_model` (`faithful`) in"
        f" its own process, answering after {opts.latency:g} s. *modelled*: research → draft → check, each"
        " role's `planner` a `[model.house]` profile on it ("
        + (
            f"`concurrency = {opts.model_concurrency}`"
            if opts.model_concurrency
            else f"no `concurrency` set: {default_concurrency()} calls in flight per worker process by default"
        )
        + "); *plain*: the same three roles on the deterministic planner, run just"
        f" before it as the baseline. {WARMUP} warm-up sagas each, then {opts.sagas} submitted back to back"
        " through `Submissions.submit`; the burst ends when the last is `ready-for-review` (none approved)."
        " Calls in flight are counted by the model server; connections sampled every 0.2 s from"
        " `pg_stat_activity` (the peak of the sum over Pressroom's processes, each connecting under its own"
        " `application_name`; this script's own shown apart), threads from /proc/PID/status `Threads:`"
        f" at the same rate ({modelled.sampler.samples} samples in the modelled burst); CPU is user + system"
        " time from /proc of the relay and workers over the burst, cores busy the whole machine's /proc/stat"
        " (other people's work included). See the module"
        " docstring of `bench/model_latency.py`."
    )


def default_concurrency() -> int:
    from orchestrator.core.pipeline import ModelProfile

    return int(ModelProfile.model_fields["concurrency"].default)


# -- main ----------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sagas", type=int, default=200, help="sagas per burst")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the model takes to answer")
    parser.add_argument(
        "--model-concurrency",
        type=int,
        default=None,
        help="the profile's `concurrency` (calls in flight per worker process; default: the product's)",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds a burst may take")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    opts = parser.parse_args()

    started = time.monotonic()
    load = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="bench-mlat-"))
    try:
        plain, modelled = run(opts, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    body = report(plain, modelled, opts.latency, opts.model_concurrency or default_concurrency())
    print(body)
    if opts.no_write:
        return
    env = " ".join(
        f"{k}={os.environ[k]}" for k in ("BENCH_DATABASE_URL", "BENCH_REDIS_URL") if k in os.environ
    )
    header = (
        f"Command: `{(env + ' ') if env else ''}nice -n 5 {command_line()}` ({stamp()}, code at {git_rev()};"
        f" whole script {time.monotonic() - started:.0f} s; 1-minute load average {load[0]:.1f} at the start"
        f" and {os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} CPUs — the machine is shared, other"
        " people's test runs and CI may overlap).\n\n"
        f"{explain(opts, plain, modelled)}\n\n"
    )
    write_section(TITLE, header + body)
    print(f"\nwrote section '## {TITLE}' of docs/benchmarks.md")


def run(opts: argparse.Namespace, workdir: Path) -> tuple[Burst, Burst]:
    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings
    from tests.support.model_pipelines import ALL_ON_MODEL, KEY, KEY_VARIABLE, Role, write_pipelines

    os.environ["PGAPPNAME"] = ME
    os.environ[KEY_VARIABLE] = KEY
    corpus = workdir / "corpus"
    shutil.copytree(CORPUS, corpus)
    flush_redis(REDIS_URL)
    with model_server(opts.latency, workdir) as url, pg_database("pressroom_bench_mlat") as db_url:
        plain_roles = tuple(Role(r.name, r.kind, r.after, model=False) for r in ALL_ON_MODEL)
        folder = write_pipelines(workdir / "pipelines", url, {"modelled": ALL_ON_MODEL, "plain": plain_roles})
        if opts.model_concurrency:  # the profile is the file's last table: the line joins it
            with (folder / "modelled.toml").open("a") as fh:
                fh.write(f"concurrency = {opts.model_concurrency}\n")
        settings = {
            "database_url": db_url,
            "broker_url": REDIS_URL,
            "secret": "bench-secret",
            "pipelines_dir": folder,
            "index_dir": workdir / "index",
        }
        app = build_app(Settings(**settings))  # the schema exists before any process starts
        env = bench_env(
            PRESSROOM_DATABASE_URL=db_url,
            PRESSROOM_BROKER_URL=REDIS_URL,
            PRESSROOM_SECRET="bench-secret",
            PRESSROOM_PIPELINES_DIR=str(folder),
            PRESSROOM_INDEX_DIR=str(workdir / "index"),
            **{KEY_VARIABLE: KEY},
        )
        topology = Topology(env, workdir)
        bench = Bench(app, corpus, workdir, opts.timeout)
        try:
            topology.start()
            print(f"plain: {opts.sagas} sagas …", flush=True)
            plain = bench.burst("plain", opts.sagas, topology, None)
            print(f"  {plain.sagas_per_s:.2f} sagas/s, {plain.states}", flush=True)
            print(f"modelled ({opts.latency:g} s): {opts.sagas} sagas …", flush=True)
            modelled = bench.burst("modelled", opts.sagas, topology, url)
            print(f"  {modelled.sagas_per_s:.2f} sagas/s, {modelled.states}", flush=True)
        except Exception:
            print(topology.logs(), file=sys.stderr)
            raise
        finally:
            topology.stop()
            app.close()
            flush_redis(REDIS_URL)
    return plain, modelled


if __name__ == "__main__":
    main()

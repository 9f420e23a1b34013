"""One chaos run, phase by phase.

1. Start a private PostgreSQL and Redis and the run's destinations (two
   webhook servers, the site watcher; chaos/destinations.py), then the relay,
   one worker per queue on its default pool and `pressroom serve` (the
   README's native topology) under the supervisor. The processes run on the
   orchestrator's default settings: only what a deployment must set is set
   (`Run.env`), and their PostgreSQL and Redis URLs come from the run's
   `Route` (chaos/routes.py): by default through one TCP proxy per server
   (chaos/links.py), which the link faults act on; the suite observes the
   servers directly.
2. Submit the calm sagas (a few of the N) and wait for them to settle before
   any fault: they are the baseline. Then start the nemesis and submit the
   rest. Each goes through the HTTP API (`POST /api/sagas` with an
   `Idempotency-Key`, so a retry after a 503 returns the same saga) to four
   destinations (`site:`, `git:`, two `webhook:`), and approve each version
   that reaches `ready-for-review` (`POST /api/sagas/ID/approve`) as a
   reviewer (open mode: `as`), while the nemesis works through its schedule.
   (The API rather than one CLI process per call: on a loaded two-core
   machine a CLI start costs seconds, which would make the run's pace the
   CLI's.)
3. Stop the nemesis, heal everything, and wait until every saga is terminal
   or `effect-unknown` (or the settle time runs out: those are stuck).
4. The operator (chaos/operator.py) settles each `effect-unknown` saga from
   the destinations' own records, then retries every `failed` saga with
   `pressroom retry`; the suite waits for each to finish.
5. Check (chaos/conclusion.py, chaos/checker.py) against every
   destination's own record, work out the figures per fault kind
   (chaos/figures.py), and write the report.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import Engine

from chaos import defaults, figures
from chaos import soak as soak_figures
from chaos.checker import SETTLED, Saga, Submission
from chaos.cluster import Postgres, Redis, Supervisor, free_port
from chaos.conclusion import conclude
from chaos.destinations import Destinations
from chaos.faults import REGISTRY, runnable
from chaos.links import Proxied
from chaos.nemesis import FAKETIME, Handles, Nemesis, plan
from chaos.observe import Snapshot, cli, snapshot
from chaos.operator import Operator
from chaos.routes import Endpoints, Route

CORPUS = Path(__file__).resolve().parent.parent / "roles" / "sample_corpus"
TOPICS = (
    "history of the library network",
    "the bookmobile and its routes",
    "the central library building",
    "digital services at the library",
    "the friends of the library book sale",
    "the riverside branch and its volunteers",
)
SUBMITTER, REVIEWER = "dana", "erin"


@dataclass(frozen=True)
class Options:
    sagas: int = 60
    seed: int = 1
    fault_seconds: float = 150.0
    settle_seconds: float = defaults.SETTLE_SECONDS
    parallel: int = 3
    out: Path = Path("chaos/out")
    docs: Path | None = Path("docs/reliability.md")
    command: str = "make chaos"
    recovery_margin: float = figures.RECOVERY_MARGIN
    calm_sagas: int = 6  # of `sagas`, submitted and settled before the first fault
    route: Route = field(default_factory=Proxied)
    # A soak (chaos/soak.py): arrivals spread over the whole fault window, a sample of each
    # process's memory and descriptors and of the database's size every `sample_seconds`,
    # and `pressroom prune` measured at the end.
    soak: bool = False
    sample_seconds: float = soak_figures.SAMPLE_SECONDS
    fault_gap: float = 4.5  # mean seconds between two faults


def _discard(jobs: set[tuple[str, int]], job: tuple[str, int], _done: object) -> None:
    jobs.discard(job)


def http_post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any, str]:
    """(status, JSON body, error text); status -1 when no answer came."""
    try:
        res = httpx.post(url, json=body, headers=headers or {}, timeout=60)
    except httpx.HTTPError as exc:
        return -1, None, f"{type(exc).__name__}: {exc}"
    try:
        out = res.json()
    except ValueError:
        out = None
    err = "" if res.is_success else (json.dumps(out) if out is not None else res.text)[:400]
    return res.status_code, out, err


def wait_for_api(api: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api}/api/sagas", timeout=5).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"pressroom serve did not answer on {api}")


class Run:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.dir = (opts.out / time.strftime("run-%Y%m%dT%H%M%SZ", time.gmtime())).resolve()
        self.logs = self.dir / "logs"
        self.logs.mkdir(parents=True)
        self._log = (self.dir / "run.log").open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.submissions: dict[int, Submission] = {}
        self.submitted_at: dict[str, float] = {}  # request id -> first attempt, epoch seconds
        self.approved: dict[str, int] = {}
        self.approve_tries: Counter[tuple[str, int]] = Counter()
        self.cli_codes: Counter[str] = Counter()
        self.cli_errors: list[dict[str, Any]] = []
        self.timeline: dict[str, float] = {}

    def log(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        print(line, flush=True)
        with self._lock:
            self._log.write(line + "\n")
            self._log.flush()

    # -- setup --------------------------------------------------------------
    def env(self, urls: Endpoints) -> dict[str, str]:
        """The processes' environment: the caller's, without any Pressroom or OpenTelemetry
        setting, plus only what a deployment must set. Everything else is the default."""
        base = {
            k: v
            for k, v in os.environ.items()  # noqa: TID251 (the suite builds its processes' environment)
            if not k.startswith(("PRESSROOM_", "OTEL_"))
        }
        base.update(
            {
                "PRESSROOM_DATABASE_URL": urls.database_url,
                "PRESSROOM_BROKER_URL": urls.broker_url,
                "PRESSROOM_SECRET": "chaos-signing-key",
                "PRESSROOM_INDEX_DIR": str(self.dir / "index"),
                "PRESSROOM_WEBHOOK_ALLOW": "127.0.0.1",  # the chaos webhooks listen on loopback
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none",
            }
        )
        return base

    # -- the user's side: submit and approve, over the HTTP API ---------------
    def submit(self, api: str, i: int, dests: list[str], at: float) -> None:
        time.sleep(max(0.0, at - time.monotonic()))
        rid = f"chaos-{self.opts.seed}-{i}"
        with self._lock:
            self.submitted_at[rid] = time.time()
        body = {
            "brief": f"{TOPICS[i % len(TOPICS)]}, saga {i}",
            "corpus": str(CORPUS),
            "destinations": dests,
            "as": SUBMITTER,
        }
        saga_id: str | None = None
        attempts = 0
        for attempts in range(1, 11):
            code, out, err = http_post(f"{api}/api/sagas", body, headers={"Idempotency-Key": rid})
            self.note("submit", code, err)
            if code in (200, 201) and out:
                saga_id = str(out["saga_id"])
                break
            if code not in (503, -1):
                break
            time.sleep(min(8.0, 1.0 * attempts))
        with self._lock:
            self.submissions[i] = Submission(rid, saga_id, attempts)

    def approve(self, api: str, saga_id: str, version: int) -> None:
        code, _, err = http_post(f"{api}/api/sagas/{saga_id}/approve", {"version": version, "as": REVIEWER})
        self.log(f"approve {saga_id[:8]} v{version}: HTTP {code}")
        self.note("approve", code, err)
        with self._lock:
            self.approve_tries[(saga_id, version)] += 1
            if code == 200 or (code not in (503, -1) and self.approve_tries[(saga_id, version)] >= 3):
                self.approved[saga_id] = version

    def note(self, what: str, code: int, err: str) -> None:
        ok = code in (0, 200, 201)
        label = f"{what} {'HTTP' if what in ('submit', 'approve') else 'exit'} {code}"
        with self._lock:
            self.cli_codes[label] += 1
            if not ok:
                self.cli_errors.append(
                    {"command": what, "exit": code, "stderr": err[-400:], "at": time.time()}
                )
        if not ok:
            self.log(f"{what}: exit {code}: {err.splitlines()[-1] if err else ''}")

    def drive(
        self, api: str, engine: Engine, pool: ThreadPoolExecutor, until: float, pending: set[Future[None]]
    ) -> Snapshot | None:
        """Approve what waits for review until every saga is settled or `until`; the last snapshot."""
        last = None
        busy: set[tuple[str, int]] = set()
        while time.monotonic() < until:
            try:
                snap = snapshot(engine)
            except Exception as exc:  # PostgreSQL restarting: look again
                self.log(f"observe: database unavailable ({type(exc).__name__})")
                time.sleep(1.0)
                continue
            last = snap
            done_submitting = all(f.done() for f in pending)
            for saga in snap.sagas:
                v = snap.head.get(saga.saga_id, 0)
                job = (saga.saga_id, v)
                if (
                    saga.state == "ready-for-review"
                    and self.approved.get(saga.saga_id, 0) < v
                    and job not in busy
                ):
                    busy.add(job)
                    fut = pool.submit(self.approve, api, saga.saga_id, v)
                    fut.add_done_callback(functools.partial(_discard, busy, job))
            ours = self.ours()
            states = [s.state for s in snap.sagas if s.saga_id in ours]
            if (
                done_submitting
                and len(states) == len(ours)
                and all(s in SETTLED for s in states)
                and not busy
            ):
                break
            time.sleep(1.0)
        return last

    def ours(self) -> set[str]:
        with self._lock:
            return {s.saga_id for s in self.submissions.values() if s.saga_id}

    def mine(self, snap: Snapshot) -> list[Saga]:
        ours = self.ours()
        return [s for s in snap.sagas if s.saga_id in ours]

    def forget_approvals(self, saga_ids: list[str]) -> None:
        """A retried saga that prepares again may ask for approval anew."""
        with self._lock:
            for sid in saga_ids:
                self.approved.pop(sid, None)


def run(opts: Options) -> int:
    r = Run(opts)
    pg_root = Path(tempfile.mkdtemp(prefix="pressroom-chaos-pg-"))
    pg = Postgres(pg_root, free_port())
    (r.dir / "redis").mkdir()
    redis = Redis(free_port(), r.dir / "redis")
    dest = Destinations(r.dir, stall_seconds=defaults.STALL_SECONDS)
    sup: Supervisor | None = None
    nemesis: Nemesis | None = None
    began = time.monotonic()
    try:
        r.log(f"run folder {r.dir}")
        pg.start()
        redis.start()
        dest.start()
        env = r.env(opts.route.start(Endpoints(pg.url, redis.url)))
        up = cli(env, "db", "upgrade")
        if up.code != 0:
            raise RuntimeError(f"pressroom db upgrade: exit {up.code}: {up.err}")
        from orchestrator.store.db import make_engine

        engine = make_engine(pg.url)  # the suite observes the server itself, never through the route
        sup = Supervisor(env, r.logs, cwd=r.dir)
        api_port = free_port()
        api = f"http://127.0.0.1:{api_port}"
        sup.topology(api_port)
        handles = Handles(sup, redis, pg, dest, r.log, extra=_extra(opts.route))
        kinds = runnable(handles.extra)
        faults = plan(opts.seed, opts.fault_seconds, kinds, mean_gap=opts.fault_gap)
        nemesis = Nemesis(faults, handles)
        operator = Operator(env, dest, r.note)
        left_out = [name for name in REGISTRY if name not in kinds]
        r.log(
            f"{opts.sagas} sagas, seed {opts.seed}, {len(faults)} faults planned over {opts.fault_seconds:.0f}s"
            + (f"; left out (this run lacks what they need): {', '.join(left_out)}" if left_out else "")
        )
        wait_for_api(api)
        sampler: soak_figures.Sampler | None = None
        if opts.soak:
            sampler = soak_figures.Sampler(
                sup, engine, r.dir / soak_figures.SAMPLES_FILE, interval=opts.sample_seconds
            )
            sampler.start()
        with (
            ThreadPoolExecutor(max_workers=opts.parallel) as submitters,
            ThreadPoolExecutor(max_workers=opts.parallel) as helpers,
        ):
            pending: set[Future[None]] = set()

            def wait(seconds: float) -> Snapshot:
                return r.drive(api, engine, helpers, time.monotonic() + seconds, pending) or snapshot(engine)

            # The calm sagas run before any fault: the baseline ("no fault" in the figures).
            t0 = time.monotonic()
            pending |= {
                submitters.submit(r.submit, api, i, dest.uris, t0 + i) for i in range(opts.calm_sagas)
            }
            wait(opts.settle_seconds)
            r.timeline["calm_settled"] = time.monotonic() - began
            nemesis.start()
            r.timeline["faults_began"] = time.monotonic() - began
            # The others arrive over the first half of the fault window, so faults meet every
            # phase; in a soak, steadily over the whole of it.
            rest = range(opts.calm_sagas, opts.sagas)
            spread = opts.fault_seconds if opts.soak else opts.fault_seconds * 0.5
            gap = spread / max(1, len(rest))
            t0 = time.monotonic() - opts.calm_sagas * gap
            pending |= {submitters.submit(r.submit, api, i, dest.uris, t0 + i * gap) for i in rest}
            wait(opts.fault_seconds)
            nemesis.stop()
            r.timeline["faults_ended"] = time.monotonic() - began
            r.log(f"nemesis stopped: {dict(nemesis.counts)}; settling")
            if isinstance(opts.route, Proxied):
                r.log(f"links: {opts.route.stats()}")
            wait(opts.settle_seconds)
            r.timeline["settled"] = time.monotonic() - began
            settled = snapshot(engine)
            r.log(f"settled: {dict(Counter(s.state for s in r.mine(settled)))}")
            _resolve(r, operator, helpers, wait, settled, opts.settle_seconds)
            r.timeline["reconciled"] = time.monotonic() - began
            took = operator.retry_failed(r.mine(snapshot(engine)), helpers)
            r.forget_approvals(took)
            r.log(f"retried {len(took)} failed saga(s); waiting for them")
            after = wait(opts.settle_seconds) if took else snapshot(engine)
            _resolve(r, operator, helpers, wait, after, opts.settle_seconds)
            r.timeline["retried"] = time.monotonic() - began
        time.sleep(1.0)
        dest.stop()
        if sampler is not None:
            sampler.stop()
        after_check = functools.partial(_soak_figures, r, env, engine) if opts.soak else None
        return conclude(r, engine, settled, dest, nemesis, sup, operator, began, after_check)
    finally:
        if nemesis is not None:
            nemesis._stop.set()
        if sup is not None:
            sup.stop()
        opts.route.stop()
        dest.stop()
        redis.stop()
        pg.stop()
        shutil.rmtree(pg_root, ignore_errors=True)


def _soak_figures(r: Run, env: dict[str, str], engine: Engine) -> dict[str, Any]:
    """After the check: every process's growth, and the database's size before and after
    pruning every finished saga of the run (ledger rows included)."""
    samples = soak_figures.read_samples(r.dir / soak_figures.SAMPLES_FILE)
    prune_env = {**env, "PRESSROOM_RECONCILE_WINDOW": "1s"}
    time.sleep(1.5)  # every finished saga is now older than the cut-off below
    pruned = soak_figures.prune_and_measure(prune_env, engine, "1s")
    warmup = min(soak_figures.WARMUP_SECONDS, r.opts.fault_seconds / 6)
    return {
        "warmup_seconds": warmup,
        "samples": len(samples),
        "growth": soak_figures.growth_dicts(soak_figures.growth(samples, warmup=warmup)),
        "database": soak_figures.database_figures(samples, pruned),
    }


def _extra(route: Route) -> dict[str, object]:
    """The nemesis's handles beyond the built-ins: the route, its proxies, libfaketime."""
    extra: dict[str, object] = {"route": route}
    if isinstance(route, Proxied):
        extra["links"] = route
    if FAKETIME.exists():
        extra["faketime"] = str(FAKETIME)
    return extra


def _resolve(
    r: Run,
    operator: Operator,
    pool: ThreadPoolExecutor,
    wait: Callable[[float], Snapshot],
    current: Snapshot,
    budget: float,
) -> None:
    for _ in range(3):
        unknown = [s for s in r.mine(current) if s.state == "effect-unknown"]
        if not unknown:
            return
        n = operator.resolve(unknown, pool)
        r.log(f"settled {n} effect-unknown step(s) or undo(s); waiting for those sagas to finish")
        current = wait(budget)


__all__ = ["Options", "run"]

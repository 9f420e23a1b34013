"""One chaos run, phase by phase.

1. Start a private PostgreSQL and Redis, the suite's webhook server, then the
   relay, one worker per role queue and `pressroom serve` (the README's native
   topology) under the supervisor.
2. Submit N sagas through the HTTP API (`POST /api/sagas` with an
   `Idempotency-Key`, so a retry after a 503 returns the same saga) to a
   `site:` folder and the webhook, and approve each version that reaches
   `ready-for-review` (`POST /api/sagas/ID/approve`) as a reviewer (open mode:
   `as`), while the nemesis works through its schedule. (The API rather than
   one CLI process per call: on a loaded two-core machine a CLI start costs
   seconds, which would make the run's pace the CLI's.)
3. Stop the nemesis, put everything back, and wait until every saga is
   terminal or `effect-unknown` (or the settle time runs out: those are stuck).
4. Reconcile each `effect-unknown` saga with `pressroom reconcile`, asking the
   destination: the webhook server's record or the site folder's receipt says
   applied (`confirmed`) or not (`absent`); then wait for those sagas to finish.
5. Check (chaos/checker.py) and write the report.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from chaos import report
from chaos.checker import SETTLED, TERMINAL, Effect, Records, Submission, check
from chaos.cluster import Postgres, Redis, Supervisor, free_port
from chaos.nemesis import Nemesis, plan
from chaos.observe import cli, events_of, snapshot, transitions
from chaos.site_watch import SiteWatch
from chaos.webhook import ChaosWebhook

CORPUS = Path(__file__).resolve().parent.parent / "roles" / "sample_corpus"
TOPICS = (
    "history of the library network",
    "the bookmobile and its routes",
    "the central library building",
    "digital services at the library",
    "the friends of the library book sale",
    "the riverside branch and its volunteers",
)
SUBMITTER, REVIEWER, OPERATOR = "dana", "erin", "oscar"
DESTINATION_TIMEOUT = 2.0


@dataclass(frozen=True)
class Options:
    sagas: int = 60
    seed: int = 1
    fault_seconds: float = 150.0
    settle_seconds: float = 150.0
    parallel: int = 3
    out: Path = Path("chaos/out")
    docs: Path | None = Path("docs/reliability.md")
    command: str = "make chaos"


def _discard(jobs: set[tuple[str, int]], job: tuple[str, int], _done: Any) -> None:
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
        self.site = self.dir / "site"
        self._log = (self.dir / "run.log").open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.submissions: dict[int, Submission] = {}
        self.approved: dict[str, int] = {}
        self.approve_tries: Counter[tuple[str, int]] = Counter()
        self.cli_codes: Counter[str] = Counter()
        self.cli_errors: list[dict[str, Any]] = []
        self.reconciled: list[tuple[str, str, str]] = []
        self.reconcile_seconds: list[float] = []
        self.timeline: dict[str, float] = {}

    def log(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        print(line, flush=True)
        with self._lock:
            self._log.write(line + "\n")
            self._log.flush()

    # -- setup --------------------------------------------------------------
    def env(self, pg_url: str, broker_url: str) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()  # noqa: TID251 (the suite builds its processes' environment)
            if not k.startswith(("PRESSROOM_", "OTEL_"))
        }
        base.update(
            {
                "PRESSROOM_DATABASE_URL": pg_url,
                "PRESSROOM_BROKER_URL": broker_url,
                "PRESSROOM_SECRET": "chaos-signing-key",
                "PRESSROOM_INDEX_DIR": str(self.dir / "index"),
                "PRESSROOM_LEASE_SECONDS": "5",
                "PRESSROOM_RELAY_POLL": "0.2",
                "PRESSROOM_RELAY_GRACE": "0.5",
                "PRESSROOM_DESTINATION_TIMEOUT": str(DESTINATION_TIMEOUT),
                "PRESSROOM_WEBHOOK_ALLOW": "127.0.0.1",  # the chaos webhook listens on loopback
                "PRESSROOM_MAX_ATTEMPTS": "10",
                "PRESSROOM_CONNECT_RETRY": "5",
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none",
            }
        )
        return base

    # -- the user's side: submit and approve, over the HTTP API ---------------
    def submit(self, api: str, i: int, dests: list[str], at: float) -> None:
        time.sleep(max(0.0, at - time.monotonic()))
        rid = f"chaos-{self.opts.seed}-{i}"
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
            self._note_cli("submit", code, err)
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
        self._note_cli("approve", code, err)
        with self._lock:
            self.approve_tries[(saga_id, version)] += 1
            if code == 200 or (code not in (503, -1) and self.approve_tries[(saga_id, version)] >= 3):
                self.approved[saga_id] = version

    def _note_cli(self, what: str, code: int, err: str) -> None:
        ok = code in (0, 200, 201)
        label = f"{what} {'exit' if what == 'reconcile' else 'HTTP'} {code}"
        with self._lock:
            self.cli_codes[label] += 1
            if not ok:
                self.cli_errors.append(
                    {"command": what, "exit": code, "stderr": err[-400:], "at": time.time()}
                )
        if not ok:
            self.log(f"{what}: exit {code}: {err.splitlines()[-1] if err else ''}")

    def drive(self, api: str, engine: Any, pool: ThreadPoolExecutor, until: float, pending: set[Any]) -> Any:
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
            ours = self._ours()
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

    def _ours(self) -> set[str]:
        with self._lock:
            return {s.saga_id for s in self.submissions.values() if s.saga_id}

    # -- reconcile ----------------------------------------------------------
    def reconcile(
        self, env: dict[str, str], snap: Any, hook: ChaosWebhook, watch: SiteWatch, pool: ThreadPoolExecutor
    ) -> int:
        """`pressroom reconcile` each uncertain step, as the destination's own record says; how many took."""
        jobs = []
        for saga in snap.sagas:
            if saga.state != "effect-unknown" or saga.saga_id not in self._ours():
                continue
            for step in saga.steps:
                if step.state != "uncertain" or not step.key:
                    continue
                is_hook = step.uri.startswith("webhook:")
                applied = hook.is_applied(step.key) if is_hook else watch.is_applied(step.key)
                jobs.append((saga.saga_id, step.uri, "confirmed" if applied else "absent", applied))
        return sum(pool.map(lambda job: self._reconcile_one(env, *job), jobs))

    def _reconcile_one(self, env: dict[str, str], saga_id: str, uri: str, outcome: str, applied: bool) -> int:
        reason = f"chaos: the destination's record says {'applied' if applied else 'not applied'}"
        for _ in range(5):
            began = time.monotonic()
            res = cli(
                env,
                "reconcile",
                saga_id,
                "--dest",
                uri,
                "--outcome",
                outcome,
                "--as",
                OPERATOR,
                "--reason",
                reason,
            )
            self._note_cli("reconcile", res.code, res.err)
            with self._lock:
                self.reconcile_seconds.append(time.monotonic() - began)
            if res.code != 5:
                break
            time.sleep(2)
        if res.code != 0:
            return 0
        with self._lock:
            self.reconciled.append((saga_id, uri, outcome))
        return 1


def run(opts: Options) -> int:
    r = Run(opts)
    pg_root = Path(tempfile.mkdtemp(prefix="pressroom-chaos-pg-"))
    pg = Postgres(pg_root, free_port())
    (r.dir / "redis").mkdir()
    redis = Redis(free_port(), r.dir / "redis")
    hook = ChaosWebhook(free_port(), r.dir / "webhook-journal.jsonl", stall_seconds=DESTINATION_TIMEOUT + 4)
    sup: Supervisor | None = None
    watch = SiteWatch(r.site, r.dir / "site-journal.jsonl")
    nemesis: Nemesis | None = None
    began = time.monotonic()
    try:
        r.log(f"run folder {r.dir}")
        pg.start()
        redis.start()
        hook.start()
        env = r.env(pg.url, redis.url)
        up = cli(env, "db", "upgrade")
        if up.code != 0:
            raise RuntimeError(f"pressroom db upgrade: exit {up.code}: {up.err}")
        from orchestrator.store.db import make_engine

        engine = make_engine(pg.url)
        sup = Supervisor(env, r.logs, cwd=r.dir)
        api_port = free_port()
        api = f"http://127.0.0.1:{api_port}"
        sup.topology(api_port)
        watch.start()
        faults = plan(opts.seed, opts.fault_seconds)
        nemesis = Nemesis(faults, supervisor=sup, redis=redis, postgres=pg, webhook=hook, log=r.log)
        dests = [f"site:{r.site}", f"webhook:{hook.url}"]
        r.log(
            f"{opts.sagas} sagas, seed {opts.seed}, {len(faults)} faults planned over {opts.fault_seconds:.0f}s"
        )
        wait_for_api(api)
        nemesis.start()
        r.timeline["faults_began"] = time.monotonic() - began
        with (
            ThreadPoolExecutor(max_workers=opts.parallel) as submitters,
            ThreadPoolExecutor(max_workers=opts.parallel) as approvers,
        ):
            # Arrivals spread over the first half of the fault window, so faults meet every phase.
            gap = opts.fault_seconds * 0.5 / opts.sagas
            t0 = time.monotonic()
            pending = {submitters.submit(r.submit, api, i, dests, t0 + i * gap) for i in range(opts.sagas)}
            r.drive(api, engine, approvers, time.monotonic() + opts.fault_seconds, pending)
            nemesis.stop()
            r.timeline["faults_ended"] = time.monotonic() - began
            r.log(f"nemesis stopped: {dict(nemesis.counts)}; settling")
            settled = r.drive(api, engine, approvers, time.monotonic() + opts.settle_seconds, pending)
            r.timeline["settled"] = time.monotonic() - began
            settled = snapshot(engine)
            r.log(f"settled: {dict(Counter(s.state for s in settled.sagas))}")
            current = settled
            for _ in range(3):
                if not any(s.state == "effect-unknown" for s in current.sagas):
                    break
                n = r.reconcile(env, current, hook, watch, approvers)
                r.log(f"reconciled {n} step(s); waiting for those sagas to finish")
                current = r.drive(api, engine, approvers, time.monotonic() + 90, pending) or snapshot(engine)
        r.timeline["reconciled"] = time.monotonic() - began
        time.sleep(1.0)
        watch.stop()
        final = snapshot(engine)
        ours = r._ours()
        site_uri, hook_uri = dests
        effects = tuple(
            Effect(hook_uri, e["kind"], e["key"], e["saga_id"], e["version_digest"]) for e in hook.events
        ) + tuple(Effect(site_uri, e["kind"], e["key"], None, e["version_digest"]) for e in watch.events)
        live = {(hook_uri, k): b.get("version_digest") for k, b in hook.applied_now.items()}
        live.update({(site_uri, k): d for k, d in watch.live().items()})
        records = Records(
            submissions=tuple(r.submissions[i] for i in sorted(r.submissions)),
            settled=tuple(s for s in settled.sagas if s.saga_id in ours),
            final=tuple(s for s in final.sagas if s.saga_id in ours),
            approvals=final.approvals,
            ledger=final.ledger,
            effects=effects,
            live=live,
            reconciled=tuple(r.reconciled),
        )
        findings = check(records)
        paths = transitions(engine)
        with (r.dir / "transitions.json").open("w", encoding="utf-8") as fh:
            json.dump({sid: paths.get(sid, []) for sid in sorted(ours)}, fh, indent=1)
        unusual = {
            sid
            for sid in ours
            if [t["to"] for t in paths.get(sid, [])][-1:] != ["succeeded"] or len(paths.get(sid, [])) != 4
        }
        with (r.dir / "events-of-unusual-sagas.json").open("w", encoding="utf-8") as fh:
            json.dump(events_of(engine, unusual), fh, indent=1, default=str)
        path_counts = Counter(
            " → ".join(["preparing"] + [t["to"] for t in paths.get(sid, [])]) for sid in ours
        )
        r.timeline["total"] = time.monotonic() - began
        failed_reasons = Counter(
            (s.reason or "")[:120] for s in final.sagas if s.saga_id in ours and s.state == "failed"
        )
        data = report.build(
            opts=opts,
            findings=findings,
            nemesis=nemesis,
            supervisor=sup,
            cli_codes=r.cli_codes,
            cli_errors=r.cli_errors,
            timeline=r.timeline,
            webhook_requests=hook.requests,
            failed_reasons=dict(failed_reasons),
            reconcile_seconds=r.reconcile_seconds,
            paths=dict(path_counts),
            submissions=records.submissions,
            terminal=TERMINAL,
        )
        report.write(data, r.dir, opts.docs, r.logs)
        r.log(f"checker: {'OK' if findings.ok else 'FINDINGS'}; report in {r.dir}")
        return 0 if findings.ok else 1
    finally:
        if nemesis is not None:
            nemesis._stop.set()
        if sup is not None:
            sup.stop()
        hook.stop()
        redis.stop()
        pg.stop()
        shutil.rmtree(pg_root, ignore_errors=True)

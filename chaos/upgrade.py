"""`python -m chaos upgrade --from REF`: a rolling upgrade from REF's release to this tree, under load.

1. REF's code: `git worktree add --detach` into a temporary folder, removed at the end.
2. A PostgreSQL and a Redis of the run's own and the run's four destinations (as
   chaos/run.py: chaos/destinations.py); `db upgrade` with REF's code; REF's relay, one
   worker per queue (each on its default pool, as the README runs them) and `serve`, under
   the supervisor, on the default settings (`Run.env`).
3. Load: one saga submitted over HTTP every `gap` seconds, each version that reaches
   review approved (chaos/run.py's `Run`), from before the upgrade until after it.
4. Under that load, `db upgrade` with this tree's code; then a command of REF's code
   started on the upgraded schema (what a supervisor restarting an old process does);
   then each process stopped with SIGTERM, as systemd stops a unit, and started with
   this tree's code, one at a time, each waited for until it runs.
5. Settle, settle `effect-unknown` sagas from the destinations' records (chaos/operator.py),
   check (chaos/checker.py), `audit verify` the sagas the upgrade met, and write
   `upgrade.json` and `upgrade.md` in the run folder.

Each process says which code it runs (chaos/releases.py); the run fails if any ran
other code than its release's.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from chaos import defaults
from chaos.checker import SETTLED, TERMINAL, Records, check
from chaos.cluster import Postgres, Redis, Supervisor, free_port, topology
from chaos.destinations import Destinations
from chaos.observe import snapshot, transitions
from chaos.operator import Operator
from chaos.releases import (
    LAUNCH,
    NEW_ROOT,
    VERSIONS,
    SetupError,
    old_tree,
    outcome,
    pressroom,
    proofs,
    release_env,
    wait_running,
)
from chaos.routes import Endpoints
from chaos.run import Options, Run
from chaos.upgrade_report import (
    Marks,
    SagaTimes,
    error_lines,
    markdown,
    phase_at,
    phase_figures,
    wrong_code,
)
from orchestrator.store.migration_head import head_from_files

AUDITED = 20


@dataclass(frozen=True)
class UpgradeOptions:
    ref: str
    sagas: int = 20
    gap: float = 3.0
    step_seconds: float = 8.0
    settle_seconds: float = defaults.SETTLE_SECONDS
    parallel: int = 3
    seed: int = 1
    out: Path = Path("chaos/out")
    command: str = "make chaos UPGRADE_FROM=REF"


class Load:
    """One saga submitted every `gap` seconds until `target` is set and reached."""

    def __init__(self, run: Run, api: str, dests: list[str], gap: float, parallel: int) -> None:
        self.run, self.api, self.dests, self.gap = run, api, dests, gap
        self.began: dict[int, float] = {}
        self.target: int | None = None
        self.done: Future[None] = Future()
        self._pool = ThreadPoolExecutor(max_workers=parallel)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="load")

    def start(self) -> None:
        self._thread.start()

    def submitted(self) -> int:
        return len(self.began)

    def _loop(self) -> None:
        jobs = []
        t0, i = time.monotonic(), 0
        while self.target is None or i < self.target:
            time.sleep(max(0.0, t0 + i * self.gap - time.monotonic()))
            self.began[i] = time.time()
            jobs.append(self._pool.submit(self.run.submit, self.api, i, self.dests, 0.0))
            i += 1
        for job in jobs:
            job.exception()
        self._pool.shutdown()
        self.done.set_result(None)


class Approver:
    """Approves each version that reaches review. It reads the sagas table with plain SQL
    (`id`, `state`, `head_version`: columns both releases have), so it works on the old
    schema too, where the checker's snapshot (this tree's models) would not."""

    def __init__(self, run: Run, api: str, engine: Engine, parallel: int) -> None:
        self.run, self.api, self.engine = run, api, engine
        self.pool = ThreadPoolExecutor(max_workers=parallel)
        self._busy: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def once(self) -> dict[str, str]:
        """Approve what waits; every saga's state (empty when the database did not answer)."""
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(text("SELECT id, state, head_version FROM sagas")).all()
        except SQLAlchemyError as exc:
            self.run.log(f"observe: database unavailable ({type(exc).__name__})")
            return {}
        for saga_id, state, version in rows:
            job = (str(saga_id), int(version))
            with self._lock:
                if (
                    state != "ready-for-review"
                    or self.run.approved.get(job[0], 0) >= job[1]
                    or job in self._busy
                ):
                    continue
                self._busy.add(job)
            self.pool.submit(self._approve, job)
        return {str(saga_id): str(state) for saga_id, state, _ in rows}

    def _approve(self, job: tuple[str, int]) -> None:
        try:
            self.run.approve(self.api, *job)
        finally:
            with self._lock:
                self._busy.discard(job)

    def run_until(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            self.once()

    def settle(self, seconds: float) -> bool:
        """Approve until every saga submitted is terminal or `effect-unknown`; False on timeout."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            states, ours = self.once(), self.run.ours()
            with self._lock:
                idle = not self._busy
            if idle and states and all(states.get(sid) in SETTLED for sid in ours):
                return True
            time.sleep(1.0)
        return False


def finished_at(path: list[dict[str, Any]]) -> float | None:
    ends = [t["at"] for t in path if t["to"] in TERMINAL]
    if not ends:
        return None
    at = datetime.fromisoformat(ends[-1])
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def audit(
    env: dict[str, str], cwd: Path, times: list[SagaTimes], marks: Marks, parallel: int
) -> dict[str, str]:
    """`pressroom audit verify` (this tree's code) of the sagas submitted before the upgrade
    ended, those that finished in a later phase first, at most AUDITED: saga id -> the
    problem, empty when it verifies."""
    mine = [t for t in times if t.saga_id and phase_at(t.submitted_at, marks) != "after"]
    mine.sort(
        key=lambda t: (
            t.finished_at is not None and phase_at(t.finished_at, marks) == phase_at(t.submitted_at, marks)
        )
    )
    ids = [t.saga_id for t in mine if t.saga_id][:AUDITED]

    def one(saga_id: str) -> tuple[str, str]:
        code, _, err = pressroom(env, cwd, "audit", "verify", saga_id, "--json")
        return saga_id, "" if code == 0 else f"exit {code}: {err}"

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return dict(pool.map(one, ids))


def dead_letters(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT reason FROM dead_letters")).all()
    return dict(Counter(str(r[0])[:160] for r in rows))


def upgrade(opts: UpgradeOptions) -> int:
    try:
        with old_tree(opts.ref) as (commit, old):
            return _upgrade(opts, commit, old)
    except SetupError as exc:
        print(f"chaos upgrade: {exc}", file=sys.stderr)
        return 2


def _upgrade(opts: UpgradeOptions, commit: str, old: Path) -> int:
    import orchestrator

    here = Path(orchestrator.__path__[0]).parent
    if here != NEW_ROOT:
        raise SetupError(
            f"this process imports orchestrator from {here}, not {NEW_ROOT}: run it from {NEW_ROOT}"
        )
    r = Run(Options(sagas=opts.sagas, seed=opts.seed, parallel=opts.parallel, out=opts.out, docs=None))
    heads = {"old": head_from_files(old / VERSIONS), "new": head_from_files(NEW_ROOT / VERSIONS)}
    if heads["old"] == heads["new"]:
        r.log(f"note: {opts.ref} and this tree ship the same schema head {heads['new']}: no migration to try")
    pg_root = Path(tempfile.mkdtemp(prefix="pressroom-upgrade-pg-"))
    pg = Postgres(pg_root, free_port())
    (r.dir / "redis").mkdir()
    redis = Redis(free_port(), r.dir / "redis")
    dest = Destinations(r.dir, stall_seconds=defaults.STALL_SECONDS)
    sup: Supervisor | None = None
    stop_approving = threading.Event()
    began = time.monotonic()
    try:
        r.log(f"run folder {r.dir}; from {opts.ref} ({commit[:12]}, schema {heads['old']}) at {old}")
        pg.start()
        redis.start()
        dest.start()
        base = r.env(Endpoints(pg.url, redis.url))
        env_old, env_new = release_env(base, old), release_env(base, NEW_ROOT)
        up_old = pressroom(env_old, r.dir, "db", "upgrade", "--json")
        smoke = pressroom(env_old, r.dir, "status", "--json")
        for what, res in (("db upgrade", up_old), ("status", smoke)):
            if res[0] != 0:
                raise SetupError(f"{opts.ref}'s `pressroom {what}` failed: {outcome(*res)}")
        from orchestrator.store.db import make_engine

        engine = make_engine(pg.url, upgrade=False)
        api_port = free_port()
        api = f"http://127.0.0.1:{api_port}"
        procs = dict(topology(api_port))
        launcher = (sys.executable, "-c", LAUNCH)
        sup = Supervisor(env_old, r.logs, cwd=r.dir)
        for name, args in procs.items():
            sup.add(name, *args, launcher=launcher, env=env_old)
        sup.start()
        for name in procs:
            wait_running(sup, name, api, r.logs)
        old_proofs = proofs(sup, r.logs)
        r.log(f"old release running: {sorted(set(old_proofs.values()), key=str)}")
        load = Load(r, api, dest.uris, opts.gap, opts.parallel)
        approver = Approver(r, api, engine, opts.parallel)
        approving = threading.Thread(target=approver.run_until, args=(stop_approving,), daemon=True)
        approving.start()
        load.start()
        before = max(1, opts.sagas // 2)
        while load.submitted() < before:
            time.sleep(0.2)
        marks_began = time.time()
        r.log(f"{before} sagas submitted on the old release; upgrading")
        t = time.monotonic()
        up_new = pressroom(env_new, r.dir, "db", "upgrade", "--json")
        r.log(f"db upgrade, new code: {outcome(*up_new)} in {time.monotonic() - t:.1f}s")
        old_start = pressroom(env_old, r.dir, "status", "--json", "--limit", "1")
        r.log(f"old code starting on the upgraded schema: {outcome(*old_start)}")
        restarts = []
        for name, args in procs.items():
            time.sleep(opts.step_seconds)
            step = sup.replace(name, [*launcher, *args], env=env_new)
            step["ready_seconds"] = round(wait_running(sup, name, api, r.logs), 2)
            r.log(f"restarted {name}: {step}")
            restarts.append(step)
        marks = Marks(marks_began, time.time())
        load.target = load.submitted() + max(1, opts.sagas - before)
        r.log(f"upgraded in {marks.ended - marks.began:.0f}s; {load.target - load.submitted()} more sagas")
        new_proofs = proofs(sup, r.logs)
        load.done.result()
        stop_approving.set()
        approving.join()
        if not approver.settle(opts.settle_seconds):
            r.log(f"not settled after {opts.settle_seconds:.0f}s")
        settled = snapshot(engine)
        r.log(f"settled: {dict(Counter(s.state for s in settled.sagas))}")
        operator = Operator(env_new, dest, r.note)
        current = settled
        for _ in range(3):
            unknown = [s for s in r.mine(current) if s.state == "effect-unknown"]
            if not unknown:
                break
            r.log(f"settled {operator.resolve(unknown, approver.pool)} effect-unknown step(s) or undo(s)")
            approver.settle(opts.settle_seconds)
            current = snapshot(engine)
        approver.pool.shutdown()
        time.sleep(1.0)
        dest.stop()
        final = snapshot(engine)
        ours = r.ours()
        effects, live = dest.record()
        findings = check(
            Records(
                submissions=tuple(r.submissions[i] for i in sorted(r.submissions)),
                settled=tuple(s for s in settled.sagas if s.saga_id in ours),
                final=tuple(s for s in final.sagas if s.saga_id in ours),
                approvals=final.approvals,
                ledger=final.ledger,
                effects=effects,
                live=live,
                reconciled=tuple(operator.reconciled),
                undo_retried=tuple(operator.undo_retried),
            )
        )
        paths = transitions(engine)
        state = {s.saga_id: s.state for s in final.sagas}
        times = [
            SagaTimes(
                load.began[i],
                sub.saga_id,
                state.get(sub.saga_id or ""),
                finished_at(paths.get(sub.saga_id or "", [])),
            )
            for i, sub in sorted(r.submissions.items())
        ]
        audits = audit(env_new, r.dir, times, marks, opts.parallel)
        wrong = {
            **{f"{k} (old)": v for k, v in wrong_code(old_proofs, str(old)).items()},
            **{f"{k} (new)": v for k, v in wrong_code(new_proofs, str(NEW_ROOT)).items()},
        }
        letters = dead_letters(engine)
        not_terminal = sum(1 for s in final.sagas if s.saga_id in ours and s.state not in TERMINAL)
        logs = {p.stem: p.read_text(errors="replace") for p in sorted(r.logs.glob("*.log"))}
        data = {
            "command": opts.command,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.monotonic() - began, 1),
            "from": {"ref": opts.ref, "commit": commit, "head": heads["old"], "root": str(old)},
            "to": {"root": str(NEW_ROOT), "head": heads["new"]},
            "db_upgrade_old": outcome(*up_old),
            "db_upgrade_new": outcome(*up_new),
            "old_start_after_upgrade": outcome(*old_start),
            "restarts": restarts,
            "marks": {"began": marks.began, "ended": marks.ended},
            "phases": phase_figures(times, marks, TERMINAL),
            "proofs": {"old": old_proofs, "new": new_proofs},
            "wrong_code": wrong,
            "dead_letters": sum(letters.values()),
            "dead_letter_reasons": letters,
            "not_terminal": not_terminal,
            "audited": len(audits),
            "audit_failures": {sid: why for sid, why in audits.items() if why},
            "unexpected_exits": sup.unexpected_exits(),
            "error_lines": error_lines(logs),
            "checker": findings.as_dict(),
        }
        data["ok"] = not (
            not findings.ok
            or wrong
            or letters
            or not_terminal
            or data["unexpected_exits"]
            or data["audit_failures"]
        )
        (r.dir / "upgrade.json").write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
        (r.dir / "upgrade.md").write_text(markdown(data), encoding="utf-8")
        print(markdown(data))
        r.log(f"upgrade: {'OK' if data['ok'] else 'FINDINGS'}; report in {r.dir}")
        return 0 if data["ok"] else 1
    finally:
        stop_approving.set()
        if sup is not None:
            sup.stop()
        dest.stop()
        redis.stop()
        pg.stop()
        shutil.rmtree(pg_root, ignore_errors=True)

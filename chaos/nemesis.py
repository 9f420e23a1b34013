"""The nemesis: the built-in fault kinds, and the thread that injects a schedule.

Built-in kinds (registered in chaos/faults.py's registry on import):

- `kill-worker`: SIGKILL a worker's process group; the supervisor restarts
  it after `hold` seconds. (There is no pool-child fault: the workers run
  their default threads pools, as the README's topology does, so a worker is
  one process with no child to kill.)
- `kill-relay`: SIGKILL the relay; restarted after `hold`.
- `kill-redis`: kill -9 redis-server, restarted after `hold` on the same port,
  alternating the persistence profiles (nothing on disk / AOF everysec).
- `restart-postgres`: `pg_ctl stop -m immediate`, then start.
- `pause-worker`: SIGSTOP a worker's process group, SIGCONT after `hold`.
- `pause-redis-clients`: Redis `CLIENT PAUSE` for `hold` seconds.
- `webhook-5xx`, `webhook-hang`: one of the two webhooks answers its next
  1–3 POSTs with 503, or applies them and then hangs past the destination
  timeout (armed for at most `hold` seconds); for the first of each and half
  of the others (seeded) its status query (GET) answers 503 for `hold`
  seconds too, so the outcome cannot be found out and the saga goes
  `effect-unknown`;
- `webhook-refuse`: one webhook refuses connections for `hold` seconds.
- `delete-5xx`, `delete-refuse`: one webhook's DELETE (a compensation)
  answers 503 (maybe deleted) or 409 (a definite refusal) for `hold`
  seconds, and the other webhook answers its next 1–3 POSTs with 409, a
  definite failure, so the sagas that meet it compensate their other
  destinations into the failing DELETE.
- `clock-skew`: restart one worker (SIGTERM, as systemd restarts it) under
  libfaketime, its wall clock 2–10 minutes ahead or behind (seeded; its
  monotonic clock untouched, as on a host whose clock is wrong; see
  chaos/skewed_site/sitecustomize.py for what that takes), and after
  `hold` seconds restart it on the true clock. Its entry gives the offset
  the worker's own ready line showed (`skew_seen_s`, then `unskewed_seen_s`),
  how the process before it and the skewed one stopped (`replaced_exit`,
  `skewed_exit`: a status, or None when it was down already; and the
  seconds it took), and ends when the worker is ready on the true clock. A
  kill meanwhile restarts it skewed still. Left out without libfaketime.

The link faults (partitions, latency, cuts, half-open connections) are
registered by chaos/links.py, with the route through the proxies they act on.

A new kind is one `register(FaultKind(...))` call: its `execute` receives the
nemesis (its `handles`, `later`) and the fault; a handle the built-ins do not
know (a TCP proxy, a clock) goes in `Handles.extra`.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from chaos.cluster import QUEUES, Postgres, Redis, Supervisor
from chaos.destinations import HOOK_NAMES, Destinations
from chaos.faults import REGISTRY, Draw, Execute, Fault, FaultKind, Option, no_options, plan, register

WORKERS = tuple(f"worker-{q}" for q in QUEUES)


@dataclass
class Handles:
    supervisor: Supervisor
    redis: Redis
    postgres: Postgres
    destinations: Destinations
    log: Callable[[str], None]
    extra: dict[str, object] = field(default_factory=dict)


class Nemesis:
    def __init__(self, faults: list[Fault], handles: Handles) -> None:
        self.faults = faults
        self.handles = handles
        self.done: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()
        self.state: dict[str, Any] = {}  # what kinds keep between their faults
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._entries: dict[Fault, dict[str, Any]] = {}
        self._amends: dict[Fault, dict[str, Any]] = {}
        self._timers: list[threading.Timer] = []
        self._thread = threading.Thread(target=self._run, daemon=True, name="nemesis")
        self._began = 0.0

    def start(self) -> None:
        self._began = time.monotonic()
        self._thread.start()

    def halt(self) -> None:
        """No more faults, and no timer of one fires; nothing is healed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        for timer in self._timers:
            timer.cancel()

    def stop(self) -> None:
        """No more faults; every kind heals what still holds."""
        self.halt()
        heals = {kind.heal for kind in REGISTRY.values() if kind.heal is not None}
        for heal in sorted(heals, key=lambda h: h.__qualname__):
            heal(self)
        self.handles.supervisor.release_holds()

    def wait(self, seconds: float) -> bool:
        """Sleep `seconds`, or less when the faults stop; True when they did."""
        return self._stop.wait(seconds)

    def amend(self, fault: Fault, **detail: object) -> None:
        """Add what a fault's own thread or timer found out later to its entry in `done`."""
        with self._lock:
            entry = self._entries.get(fault)
            if entry is None:
                self._amends.setdefault(fault, {}).update(detail)
            else:
                entry.update(detail)
        self.handles.log(f"nemesis: {fault.kind} {fault.target or ''} at {fault.at}: {detail}")

    def later(self, seconds: float, fn: Callable[[], object]) -> None:
        timer = threading.Timer(seconds, fn)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _run(self) -> None:
        for fault in self.faults:
            wait = self._began + fault.at - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                return
            if self._stop.is_set():
                return
            started = time.time()
            try:
                detail = REGISTRY[fault.kind].execute(self, fault) or {}
            except Exception as exc:  # a fault that could not be injected is recorded, not fatal
                detail = {"error": f"{type(exc).__name__}: {exc}"}
            entry = {
                "at": round(time.monotonic() - self._began, 2),
                "kind": fault.kind,
                "target": fault.target,
                "hold": fault.hold,
                **dict(fault.options),
                **detail,
                "started": round(started, 3),
                "ended": round(max(time.time(), started + fault.hold), 3),
            }
            if not entry.get("skipped") and not entry.get("error"):
                self.counts[fault.kind] += 1
            with self._lock:
                entry.update(self._amends.pop(fault, {}))
                self._entries[fault] = entry
                self.done.append(entry)
            self.handles.log(f"nemesis: {entry}")


# -- processes ---------------------------------------------------------------


def _kill(n: Nemesis, f: Fault) -> dict[str, Any]:
    return {"pid": n.handles.supervisor.kill(f.target or "relay", hold=f.hold)}


def _pause_worker(n: Nemesis, f: Fault) -> dict[str, Any] | None:
    target = f.target or WORKERS[0]
    if not n.handles.supervisor.signal(target, signal.SIGSTOP):
        return {"skipped": "not running"}
    n.later(f.hold, lambda: n.handles.supervisor.signal(target, signal.SIGCONT))
    return None


def _resume_workers(n: Nemesis) -> None:
    for name in WORKERS:
        n.handles.supervisor.signal(name, signal.SIGCONT)


# -- clocks ------------------------------------------------------------------------

FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SKEWED_SITE = Path(__file__).resolve().parent / "skewed_site"
READY = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}): INFO/MainProcess\] \S+ ready\.$", re.M)
STOP_GRACE = 30.0  # seconds a worker may take to finish its tasks on SIGTERM
READY_SECONDS = 90.0  # for a restarted worker's ready line, on a loaded machine


def skewed(env: dict[str, str], minutes: int, lib: Path = FAKETIME) -> dict[str, str]:
    """`env` under libfaketime: the wall clock `minutes` off, the monotonic clock true (and
    `time.sleep` made to work so, chaos/skewed_site/sitecustomize.py)."""

    def first(path: str, name: str, sep: str) -> str:
        return sep.join(p for p in (path, env.get(name, "")) if p)

    return {
        **env,
        "LD_PRELOAD": first(str(lib), "LD_PRELOAD", " "),
        "FAKETIME": f"{minutes:+d}m",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": first(str(SKEWED_SITE), "PYTHONPATH", os.pathsep),
    }


def ready_clock(text: str) -> float | None:
    """The time (epoch seconds) in the first ready line of a worker's log `text`, read in
    local time as the worker wrote it; None without one."""
    found = READY.search(text)
    if found is None:
        return None
    at = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
    return at + int(found.group(2)) / 1000


def _skew_minutes(rng: random.Random, _before: list[Fault]) -> tuple[Option, ...]:
    minutes = rng.randint(2, 10)
    return (("skew_minutes", minutes if rng.random() < 0.5 else -minutes),)


def _clock_seen(log: Path, offset: int) -> float | None:
    """Seconds the worker's clock is off, from its ready line after `offset` in `log`."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        with log.open("rb") as fh:
            fh.seek(offset)
            at = ready_clock(fh.read().decode("utf-8", "replace"))
        if at is not None:
            return round(at - time.time(), 1)
        time.sleep(0.25)
    return None


def _restart_worker(n: Nemesis, name: str, env: dict[str, str] | None) -> tuple[dict[str, Any], float | None]:
    log = n.handles.supervisor.log_of(name)
    offset = log.stat().st_size if log.exists() else 0
    out = n.handles.supervisor.replace(name, env=env, grace=STOP_GRACE)
    return out, _clock_seen(log, offset)


def _skewed_for(n: Nemesis, f: Fault, name: str, env: dict[str, str]) -> None:
    """Restart `name` skewed, keep it so for the hold (or until the faults stop), restart it true."""
    try:
        out, seen = _restart_worker(n, name, env)
        n.amend(f, replaced_exit=out["exit"], replaced_stop_seconds=out["stop_seconds"], skew_seen_s=seen)
        n.wait(f.hold)
    finally:
        out, seen = _restart_worker(n, name, None)
        n.amend(
            f,
            skewed_exit=out["exit"],
            skewed_stop_seconds=out["stop_seconds"],
            unskewed_seen_s=seen,
            ended=round(time.time(), 3),
        )


def _clock_skew(n: Nemesis, f: Fault) -> dict[str, Any] | None:
    name = f.target or WORKERS[0]
    clocks: dict[str, threading.Thread] = n.state.setdefault("clocks", {})
    if name in clocks and clocks[name].is_alive():
        return {"skipped": f"{name} already skewed"}
    env = skewed(
        n.handles.supervisor.env, int(f.option("skew_minutes", 5)), Path(str(n.handles.extra["faketime"]))
    )
    clocks[name] = threading.Thread(
        target=_skewed_for, args=(n, f, name, env), daemon=True, name=f"skew-{name}"
    )
    clocks[name].start()
    return {"faketime": env["FAKETIME"]}


def _unskew_clocks(n: Nemesis) -> None:
    """The faults stopped: each skewed worker's thread restarts it on the true clock."""
    for thread in n.state.get("clocks", {}).values():
        thread.join(timeout=2 * (STOP_GRACE + READY_SECONDS))


# -- servers -------------------------------------------------------------------


def _kill_redis(n: Nemesis, f: Fault) -> dict[str, Any]:
    redis = n.handles.redis
    if not redis.ping():
        return {"skipped": "redis already down"}
    redis.kill()
    n.state["redis_restarts"] = n.state.get("redis_restarts", 0) + 1
    persistent = n.state["redis_restarts"] % 2 == 0
    n.later(f.hold, lambda: redis.start(persistent=persistent))
    return {"restart_profile": "aof" if persistent else "none"}


def _redis_up(n: Nemesis) -> None:
    if not n.handles.redis.ping():
        n.handles.redis.start(persistent=False)


def _restart_postgres(n: Nemesis, _f: Fault) -> dict[str, Any]:
    return {"down_seconds": round(n.handles.postgres.restart_immediate(), 2)}


def _pause_redis_clients(n: Nemesis, f: Fault) -> dict[str, Any] | None:
    if not n.handles.redis.ping():
        return {"skipped": "redis down"}
    n.handles.redis.client_pause(int(f.hold * 1000))
    return None


# -- the webhooks ----------------------------------------------------------------


def _status_down_5xx(rng: random.Random, before: list[Fault]) -> tuple[Option, ...]:
    """The first 503 takes the status query down too (so a short run meets effect-unknown
    and reconcile); later ones do half of the time."""
    coin = rng.random() < 0.5
    return (("status_down", coin or all(f.kind != "webhook-5xx" for f in before)),)


def _status_down_hang(rng: random.Random, before: list[Fault]) -> tuple[Option, ...]:
    coin = rng.random() < 0.5
    return (("status_down", coin or all(f.kind != "webhook-hang" for f in before)),)


def _partner_posts(rng: random.Random, _before: list[Fault]) -> tuple[Option, ...]:
    return (("partner_posts", rng.randint(1, 3)),)


def _once_normal(n: Nemesis, name: str, hold: float) -> None:
    """Back to normal after `hold`, unless a later fault of this webhook took it over."""
    gens: dict[str, int] = n.state.setdefault("webhook_gen", {})
    gens[name] = gens.get(name, 0) + 1
    gen = gens[name]
    hook = n.handles.destinations.hooks[name]

    def back() -> None:
        if gens[name] == gen:
            hook.set_mode("normal")

    n.later(hold, back)


def _webhook(n: Nemesis, f: Fault) -> dict[str, Any] | None:
    name = f.target or HOOK_NAMES[0]
    hook = n.handles.destinations.hooks[name]
    if hook.mode != "normal":
        return {"skipped": f"{name} already {hook.mode}"}
    _once_normal(n, name, f.hold)
    if f.kind == "webhook-refuse":
        hook.set_mode("refuse")
        return None
    # 503 and hang meet the next `posts` publishes (or end after `hold`, whichever first).
    posts = 1 + int(f.hold) % 3
    if f.option("status_down"):
        hook.status_down_until = time.monotonic() + f.hold
    hook.arm("error" if f.kind == "webhook-5xx" else "stall", posts)
    return {"posts": posts}


def _failing_deletes(n: Nemesis, f: Fault) -> dict[str, Any]:
    name = f.target or HOOK_NAMES[0]
    hook = n.handles.destinations.hooks[name]
    hook.fail_deletes("error" if f.kind == "delete-5xx" else "refuse", f.hold)
    partner = n.handles.destinations.other_hook(name)
    if partner.mode != "normal":
        return {"partner": f"{partner.name} already {partner.mode}: not armed"}
    _once_normal(n, partner.name, f.hold)
    partner.arm("reject", int(f.option("partner_posts", 1)))
    return {"partner": partner.name}


def _webhooks_normal(n: Nemesis) -> None:
    for hook in n.handles.destinations.hooks.values():
        hook.set_mode("normal")
        hook.status_down_until = 0.0
        hook.delete_down_until = 0.0


def _of_webhooks(
    name: str, weight: float, hold: tuple[float, float], execute: Execute, draw: Draw
) -> FaultKind:
    """A kind that targets one of the two webhooks, late in the first round."""
    return FaultKind(name, weight, hold, execute, HOOK_NAMES, late=True, draw=draw, heal=_webhooks_normal)


for _kind in (
    FaultKind("kill-worker", 3, (0.5, 3.0), _kill, targets=WORKERS),
    FaultKind("kill-relay", 1.5, (0.5, 3.0), _kill),
    FaultKind("kill-redis", 1.5, (1.0, 4.0), _kill_redis, heal=_redis_up),
    FaultKind("restart-postgres", 1.5, (0.0, 0.0), _restart_postgres),
    FaultKind("pause-worker", 1.5, (2.0, 8.0), _pause_worker, targets=WORKERS, heal=_resume_workers),
    FaultKind("pause-redis-clients", 1, (1.0, 4.0), _pause_redis_clients),
    _of_webhooks("webhook-5xx", 1, (20.0, 40.0), _webhook, _status_down_5xx),
    _of_webhooks("webhook-refuse", 0.5, (2.0, 4.0), _webhook, no_options),
    _of_webhooks("webhook-hang", 1, (20.0, 40.0), _webhook, _status_down_hang),
    _of_webhooks("delete-5xx", 1, (10.0, 30.0), _failing_deletes, _partner_posts),
    _of_webhooks("delete-refuse", 1, (10.0, 30.0), _failing_deletes, _partner_posts),
    FaultKind(
        "clock-skew",
        0.5,
        (15.0, 30.0),
        _clock_skew,
        targets=WORKERS,
        draw=_skew_minutes,
        heal=_unskew_clocks,
        requires=("faketime",),
    ),
):
    register(_kind)

__all__ = [
    "FAKETIME",
    "REGISTRY",
    "SKEWED_SITE",
    "WORKERS",
    "Fault",
    "FaultKind",
    "Handles",
    "Nemesis",
    "plan",
    "ready_clock",
    "register",
    "skewed",
]

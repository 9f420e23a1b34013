"""The nemesis: a seeded schedule of faults (`plan`, pure) and its execution.

Faults:

- `kill-worker`: SIGKILL a worker's process group (main and pool child); the
  supervisor restarts it after `hold` seconds.
- `kill-pool-child`: SIGKILL one prefork child; the worker's main process forks
  another.
- `kill-relay`: SIGKILL the relay; restarted after `hold`.
- `kill-redis`: kill -9 redis-server, restarted after `hold` on the same port,
  alternating the persistence profiles (nothing on disk / AOF everysec).
- `restart-postgres`: `pg_ctl stop -m immediate`, then start.
- `pause-worker`: SIGSTOP a worker's process group, SIGCONT after `hold`.
- `pause-redis-clients`: Redis `CLIENT PAUSE` for `hold` seconds.
- `webhook-5xx`, `webhook-hang`: the webhook destination answers the next
  1–3 POSTs with 503, or applies them and then hangs past the destination
  timeout (armed for at most `hold` seconds); for the first of each and half
  of the others (seeded) the status query (GET) answers 503 for `hold`
  seconds too, so the outcome cannot be found out and the saga goes
  `effect-unknown`;
- `webhook-refuse`: it refuses connections for `hold` seconds.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from chaos.cluster import QUEUES, Postgres, Redis, Supervisor
from chaos.webhook import ChaosWebhook

FAULTS: dict[str, float] = {  # kind -> weight
    "kill-worker": 3,
    "kill-pool-child": 2,
    "kill-relay": 1.5,
    "kill-redis": 1.5,
    "restart-postgres": 1.5,
    "pause-worker": 1.5,
    "pause-redis-clients": 1,
    "webhook-5xx": 1,
    "webhook-refuse": 0.5,
    "webhook-hang": 1,
}


@dataclass(frozen=True)
class Fault:
    at: float  # seconds from the start of the fault phase
    kind: str
    target: str | None
    hold: float
    status_down: bool = False  # webhook-5xx / webhook-hang: GET answers 503 while the fault holds


def plan(seed: int, duration: float, *, mean_gap: float = 4.5) -> list[Fault]:
    """The faults of one run: the same seed gives the same schedule. The first
    round holds every kind once (shuffled; the destination's faults last, when
    publishing has begun), so even a short run meets them all; then kinds are
    drawn by weight."""
    rng = random.Random(seed)
    kinds, weights = zip(*FAULTS.items(), strict=True)
    first = [k for k in kinds if not k.startswith("webhook-")]
    rng.shuffle(first)
    later = [k for k in kinds if k.startswith("webhook-")]  # after the first publishes can have started
    rng.shuffle(later)
    first += later
    out: list[Fault] = []
    t = rng.uniform(2.0, 4.0)
    while t < duration:
        kind = first.pop(0) if first else rng.choices(kinds, weights)[0]
        target: str | None = None
        if kind in ("kill-worker", "kill-pool-child", "pause-worker"):
            target = f"worker-{rng.choice(QUEUES)}"
        hold = {
            "kill-worker": rng.uniform(0.5, 3.0),
            "kill-pool-child": 0.0,
            "kill-relay": rng.uniform(0.5, 3.0),
            "kill-redis": rng.uniform(1.0, 4.0),
            "restart-postgres": 0.0,
            "pause-worker": rng.uniform(2.0, 8.0),
            "pause-redis-clients": rng.uniform(1.0, 4.0),
            "webhook-5xx": rng.uniform(20.0, 40.0),
            "webhook-refuse": rng.uniform(2.0, 4.0),
            "webhook-hang": rng.uniform(20.0, 40.0),
        }[kind]
        # The first 503 and the first hang take the status query down too (so a short run
        # meets effect-unknown and reconcile); later ones do half of the time.
        status_down = kind in ("webhook-5xx", "webhook-hang") and (
            rng.random() < 0.5 or all(f.kind != kind for f in out)
        )
        out.append(Fault(round(t, 2), kind, target, round(hold, 2), status_down))
        t += rng.expovariate(1.0 / mean_gap)
    return out


class Nemesis:
    def __init__(
        self,
        faults: list[Fault],
        *,
        supervisor: Supervisor,
        redis: Redis,
        postgres: Postgres,
        webhook: ChaosWebhook,
        log: Any,
    ) -> None:
        self.faults = faults
        self.sup = supervisor
        self.redis = redis
        self.pg = postgres
        self.hook = webhook
        self.log = log
        self.done: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._timers: list[threading.Timer] = []
        self._thread = threading.Thread(target=self._run, daemon=True, name="nemesis")
        self._redis_restarts = 0
        self._webhook_gen = 0

    def start(self) -> None:
        self._began = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """No more faults; undo the ones still holding (SIGCONT, webhook normal, Redis up)."""
        self._stop.set()
        self._thread.join(timeout=60)
        for timer in self._timers:
            timer.cancel()
        for q in QUEUES:
            self.sup.signal(f"worker-{q}", signal.SIGCONT)
        self.hook.set_mode("normal")
        self.hook.status_down_until = 0.0
        if not self.redis.ping():
            self.redis.start(persistent=False)
        self.sup.release_holds()

    def _later(self, seconds: float, fn: Any) -> None:
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
            try:
                detail = self._inject(fault)
            except Exception as exc:  # a fault that could not be injected is recorded, not fatal
                detail = {"error": f"{type(exc).__name__}: {exc}"}
            entry = {
                "at": round(time.monotonic() - self._began, 2),
                "kind": fault.kind,
                "target": fault.target,
                "hold": fault.hold,
                **(detail or {}),
            }
            if not entry.get("skipped") and not entry.get("error"):
                self.counts[fault.kind] += 1
            self.done.append(entry)
            self.log(f"nemesis: {entry}")

    def _inject(self, fault: Fault) -> dict[str, Any] | None:
        kind, target, hold = fault.kind, fault.target, fault.hold
        if kind == "kill-worker":
            assert target
            return {"pid": self.sup.kill(target, hold=hold)}
        if kind == "kill-pool-child":
            assert target
            kids = self.sup.children(target)
            if not kids:
                return {"skipped": "no pool child"}
            import os

            os.kill(kids[0], signal.SIGKILL)
            return {"pid": kids[0]}
        if kind == "kill-relay":
            return {"pid": self.sup.kill("relay", hold=hold)}
        if kind == "kill-redis":
            if not self.redis.ping():
                return {"skipped": "redis already down"}
            self.redis.kill()
            self._redis_restarts += 1
            persistent = self._redis_restarts % 2 == 0
            self._later(hold, lambda: self.redis.start(persistent=persistent))
            return {"restart_profile": "aof" if persistent else "none"}
        if kind == "restart-postgres":
            return {"down_seconds": round(self.pg.restart_immediate(), 2)}
        if kind == "pause-worker":
            assert target
            if not self.sup.signal(target, signal.SIGSTOP):
                return {"skipped": "not running"}
            self._later(hold, lambda: self.sup.signal(target, signal.SIGCONT))
            return None
        if kind == "pause-redis-clients":
            if not self.redis.ping():
                return {"skipped": "redis down"}
            self.redis.client_pause(int(hold * 1000))
            return None
        if kind.startswith("webhook-"):
            return self._webhook(kind, hold, fault.status_down)
        raise ValueError(kind)

    def _webhook(self, kind: str, hold: float, status_down: bool) -> dict[str, Any] | None:
        if self.hook.mode != "normal":
            return {"skipped": f"webhook already {self.hook.mode}"}
        self._webhook_gen += 1
        gen = self._webhook_gen

        def back_to_normal() -> None:
            if self._webhook_gen == gen:  # a later webhook fault is not cut short
                self.hook.set_mode("normal")

        self._later(hold, back_to_normal)
        if kind == "webhook-refuse":
            self.hook.set_mode("refuse")
            return None
        # 503 and hang meet the next `posts` publishes (or end after `hold`, whichever first).
        posts = 1 + int(hold) % 3
        if status_down:
            self.hook.status_down_until = time.monotonic() + hold
        self.hook.arm("error" if kind == "webhook-5xx" else "stall", posts)
        return {"posts": posts, "status_down": status_down}

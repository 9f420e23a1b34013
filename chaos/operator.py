"""The operator's part of a run, through the CLI as a person runs it.

`resolve` settles each `effect-unknown` saga of the run from the
destinations' own records (chaos/destinations.py):

- a publish that may have happened (`uncertain`): `pressroom reconcile
  --outcome confirmed` when the destination holds the key, else `absent`;
- an undo that failed (`compensation-failed`): `absent` when the destination
  no longer holds the key (the undo took after all); when it still does,
  `pressroom retry`, which runs the undo again.

`retry_failed` runs `pressroom retry SAGA_ID --as OPERATOR` for each `failed`
saga of the run. A command that finds a service unreachable (exit 5) is run
again, at most five times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from chaos.checker import Saga
from chaos.destinations import Destinations
from chaos.observe import CliResult, cli

OPERATOR = "oscar"
Note = Callable[[str, int, str], None]


def decide(
    sagas: Iterable[Saga], is_live: Callable[[str, str], bool]
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """What the operator does, from the destinations' records (`is_live(uri, key)`):
    ((saga id, uri, reconcile outcome) for each step to reconcile, sagas whose undo runs again)."""
    jobs: list[tuple[str, str, str]] = []
    undo_again: set[str] = set()
    for saga in sagas:
        if saga.state != "effect-unknown":
            continue
        for step in saga.steps:
            if not step.key or step.state not in ("uncertain", "compensation-failed"):
                continue
            live = is_live(step.uri, step.key)
            if step.state == "uncertain":
                jobs.append((saga.saga_id, step.uri, "confirmed" if live else "absent"))
            elif live:
                undo_again.add(saga.saga_id)
            else:
                jobs.append((saga.saga_id, step.uri, "absent"))
    return jobs, sorted(undo_again)


class Operator:
    def __init__(self, env: dict[str, str], destinations: Destinations, note: Note) -> None:
        self.env = env
        self.destinations = destinations
        self.note = note
        self._lock = threading.Lock()
        self.reconciled: list[tuple[str, str, str]] = []  # (saga id, uri, outcome)
        self.undo_retried: list[str] = []
        self.retried: list[str] = []
        self.retry_refused: dict[str, str] = {}
        self.seconds: list[float] = []

    def resolve(self, sagas: Iterable[Saga], pool: ThreadPoolExecutor) -> int:
        """Settle each unsettled step of these `effect-unknown` sagas; how many commands took."""
        jobs, undo_again = decide(sagas, self.destinations.is_live)
        done = sum(pool.map(lambda job: self._reconcile(*job), jobs))
        done += sum(pool.map(self._undo_again, undo_again))
        return done

    def retry_failed(self, sagas: Iterable[Saga], pool: ThreadPoolExecutor) -> list[str]:
        """`pressroom retry` each failed saga; the ones it took."""
        failed = sorted(s.saga_id for s in sagas if s.state == "failed")
        took = [sid for sid, ok in zip(failed, pool.map(self._retry, failed), strict=True) if ok]
        with self._lock:
            self.retried += took
        return took

    def _run(self, what: str, *args: str) -> CliResult:
        res = CliResult(-1, None, "not run")
        for _ in range(5):
            began = time.monotonic()
            res = cli(self.env, what, *args, "--as", OPERATOR)
            self.note(what, res.code, res.err)
            with self._lock:
                self.seconds.append(time.monotonic() - began)
            if res.code != 5:
                break
            time.sleep(2)
        return res

    def _reconcile(self, saga_id: str, uri: str, outcome: str) -> int:
        said = "applied" if outcome == "confirmed" else "not applied"
        res = self._run(
            "reconcile",
            saga_id,
            "--dest",
            uri,
            "--outcome",
            outcome,
            "--reason",
            f"chaos: the destination's record says {said}",
        )
        if res.code != 0:
            return 0
        with self._lock:
            self.reconciled.append((saga_id, uri, outcome))
        return 1

    def _undo_again(self, saga_id: str) -> int:
        if self._run("retry", saga_id).code != 0:
            return 0
        with self._lock:
            self.undo_retried.append(saga_id)
        return 1

    def _retry(self, saga_id: str) -> bool:
        res = self._run("retry", saga_id)
        if res.code != 0:
            with self._lock:
                self.retry_refused[saga_id] = f"exit {res.code}: {res.err[-200:]}"
        return res.code == 0

    def settlements(self) -> dict[str, list[str]]:
        """Saga id -> what a person did to settle it (confirmed / absent / undo-retried)."""
        out: dict[str, list[str]] = {}
        for sid, _, outcome in self.reconciled:
            out.setdefault(sid, []).append(outcome)
        for sid in self.undo_retried:
            out.setdefault(sid, []).append("undo-retried")
        return out


__all__ = ["OPERATOR", "Operator", "decide"]

"""What `pressroom eval` attaches to one app to watch a saga and to inject its faults.

- `ToolPathRecorder` stands in for `app.harness`: every proposal any role
  makes, with its caller and result, is kept on its way through the one tool
  path (`Harness.call`), which it then calls unchanged.
- `RoleTimer` wraps each role handler and sums its wall time per role.
- `Faults` injects the recovery cases' faults into a running app:
  `worker-killed` (a role's handler dies after its turn, before the commit;
  its lease runs out and the sweeper sends the work again),
  `destination-timeout-after-apply` (the `memory:` destination applies, then
  times out; with `status_known: false` its status query cannot answer
  either) and `duplicate-delivery` (every message is delivered twice).

Writes nothing but the killed work's lease deadline (moved to the past, in
place of a clock running out).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import update
from sqlmodel import col

from orchestrator.core.errors import InvalidInput
from orchestrator.harness.spec import ToolCall, ToolResult
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import unit_of_work
from orchestrator.store.tables import WorkRow, utcnow
from orchestrator.toolpath.engine import Caller, Harness
from outbox.broker import InlineBroker
from sagas.destinations.memory import MemoryStore

FAULT_KINDS = ("worker-killed", "destination-timeout-after-apply", "duplicate-delivery")


@dataclass(frozen=True)
class Recorded:
    role: str
    tool: str
    arguments: str | dict[str, Any]
    capabilities: frozenset[str]
    status: str
    reason: str | None


class ToolPathRecorder:
    """`Harness.call` with a record of each call; every other attribute is the harness's own."""

    def __init__(self, harness: Harness) -> None:
        self._harness = harness
        self.calls: list[Recorded] = []

    def call(self, proposal: ToolCall, caller: Caller) -> ToolResult:
        result = self._harness.call(proposal, caller)
        self.calls.append(
            Recorded(
                role=caller.actor,
                tool=proposal.tool,
                arguments=proposal.arguments,
                capabilities=frozenset(caller.capabilities),
                status=result.status.value,
                reason=result.reason,
            )
        )
        return result

    def probe(self, proposal: ToolCall, caller: Caller) -> ToolResult:
        """A call the evaluation itself sends, kept apart from the roles' own (role `eval-probe`)."""
        result = self._harness.call(proposal, caller)
        self.calls.append(
            Recorded(
                role="eval-probe",
                tool=f"{caller.actor}:{proposal.tool}",
                arguments=proposal.arguments,
                capabilities=frozenset(caller.capabilities),
                status=result.status.value,
                reason=result.reason,
            )
        )
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._harness, name)


def role_of(task: str) -> str:
    """`pressroom.writer.draft` -> `writer`."""
    parts = task.split(".")
    return parts[1] if len(parts) > 2 else task


class WorkerKilled(Exception):  # noqa: N818  (an injected event, not an error of the code)
    """The worker died mid-turn: the turn ran, its commit never happened."""


@dataclass
class RoleTimer:
    seconds: dict[str, float] = field(default_factory=dict)
    turns: Counter[str] = field(default_factory=Counter)

    def wrap(self, task: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return handler(*args)
            finally:
                role = role_of(task)
                self.seconds[role] = self.seconds.get(role, 0.0) + time.perf_counter() - started
                self.turns[role_of(task)] += 1

        return timed


@dataclass
class Faults:
    """One case's fault, attached to an app before the saga starts."""

    spec: dict[str, Any] | None
    killed: list[str] = field(default_factory=list)  # work ids whose worker died, not yet recovered
    kills: int = 0
    deliveries: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def kind(self) -> str | None:
        return None if self.spec is None else str(self.spec.get("kind"))

    def check(self) -> None:
        if self.spec is not None and self.kind not in FAULT_KINDS:
            raise InvalidInput(f"unknown fault {self.kind!r}; known: {', '.join(FAULT_KINDS)}")

    def attach(self, app: Pressroom, store: MemoryStore) -> None:
        self.check()
        if self.kind == "worker-killed":
            task = _task_named(app, str((self.spec or {}).get("task", "")))
            app.handlers[task] = self._killing(app.handlers[task])
        elif self.kind == "destination-timeout-after-apply":
            store.fail_next_publish("applied-then-lost")
            store.status_unknown = not bool((self.spec or {}).get("status_known", True))
        elif self.kind == "duplicate-delivery":
            self._duplicating(app)

    def _killing(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        def killed_once(handoff: Any, message_id: str) -> Any:
            finalize = handler(handoff, message_id)
            if self.kills == 0:  # one kill per run
                self.kills += 1
                self.killed.append(handoff.work_id)
                raise WorkerKilled(f"worker killed after its turn on {handoff.work_id}")
            return finalize

        return killed_once

    def _duplicating(self, app: Pressroom) -> None:
        broker = app.broker
        if not isinstance(broker, InlineBroker):
            raise InvalidInput("duplicate-delivery needs the in-process broker")
        send = broker.send
        handle = app.consumer.handle
        doubled: set[str] = set()

        def send_twice(envelope: Any) -> None:
            send(envelope)
            if envelope.message_id not in doubled:
                doubled.add(envelope.message_id)
                broker.queue.put(envelope)  # the broker delivers the same message again
                self.deliveries[envelope.task] += 1

        def counted(envelope: Any) -> str:
            outcome = handle(envelope)
            self.outcomes[outcome] += 1
            return outcome

        broker.send = send_twice  # type: ignore[method-assign]
        app.consumer.handle = counted  # type: ignore[method-assign,assignment]

    def recover(self, app: Pressroom) -> int:
        """The killed workers' leases run out; the sweeper sends their work again."""
        expired = len(self.killed)
        with unit_of_work(app.engine) as uow:
            for work_id in self.killed:
                uow.session.execute(
                    update(WorkRow)
                    .where(col(WorkRow.id) == work_id, col(WorkRow.done_at).is_(None))
                    .values(lease_until=utcnow() - timedelta(seconds=1))
                )
        self.killed.clear()
        if expired:
            app.consumer.drain()
        return expired


def _task_named(app: Pressroom, role: str) -> str:
    matches = [t for t in app.handlers if role_of(t) == role]
    if len(matches) != 1:
        raise InvalidInput(f"worker-killed needs a task of one role, not {role!r}")
    return matches[0]


@contextmanager
def quiet(logger: str = "outbox.consumer") -> Iterator[None]:
    """An injected kill is logged by the app as a failure; the report says it instead."""
    log = logging.getLogger(logger)
    before = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = before


__all__ = ["FAULT_KINDS", "Faults", "Recorded", "RoleTimer", "ToolPathRecorder", "quiet", "role_of"]

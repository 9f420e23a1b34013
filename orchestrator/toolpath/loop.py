"""The bounded agent loop (invariant 9): steps, retries, deadline, budget.

A planner proposes; the harness decides; the result goes back to the planner
as data. Every stop writes its reason as an event (`loop_stopped`): at once,
or, with `record_stop=False`, in the caller's own transaction (a role writes
it with its handoff's result, so the stop commits with what the loop made).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.core.errors import RetryLater
from orchestrator.harness.ports import Planner
from orchestrator.harness.provenance import DataEnvelope, wrap
from orchestrator.harness.spec import Refusal, ToolResult, ToolStatus
from orchestrator.toolpath.engine import Caller, Harness, Usage, sleep_backoff


@dataclass(frozen=True)
class LoopLimits:
    max_steps: int = 24
    max_retries: int = 3
    max_rejections: int = 3
    deadline_seconds: float = 120.0
    budget: int = 40  # tool calls, whatever their outcome

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_retries", "max_rejections", "budget"):
            if getattr(self, name) < 0:
                raise ValueError(f"LoopLimits.{name} must not be negative")
        if self.deadline_seconds <= 0:
            raise ValueError("LoopLimits.deadline_seconds must be positive")


@dataclass
class LoopOutcome:
    stop_reason: str
    results: list[ToolResult] = field(default_factory=list)
    steps: int = 0
    budget_left: int = 0
    # Stopped because the saga's durable budget is spent (`Refusal.BUDGET_EXHAUSTED`).
    exhausted: bool = False
    # The `loop_stopped` event's fields (`HarnessStore.record_event` keywords).
    stop_event: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.stop_reason == "planner finished"


def run_loop(
    harness: Harness,
    planner: Planner,
    caller: Caller,
    limits: LoopLimits | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    record_stop: bool = True,
) -> LoopOutcome:
    limits = limits or LoopLimits()
    transcript: list[DataEnvelope] = []
    outcome = LoopOutcome(stop_reason="", budget_left=limits.budget)
    started = clock()
    errors = rejections = 0
    tokens_before = _tokens(planner).get("model_tokens", 0)
    while True:
        reason = _limit_hit(outcome, limits, clock() - started)
        if reason:
            break
        proposal = planner.propose(transcript)
        if proposal is None:
            reason = "planner finished"
            break
        outcome.steps += 1
        outcome.budget_left -= 1
        spent, tokens = _tokens(planner).get("model_tokens", 0), tokens_before
        tokens_before = spent
        # A planner whose model calls are charged where they are recorded charges nothing here.
        usage = Usage(tokens=max(0, spent - tokens)) if getattr(planner, "charges_tokens", True) else Usage()
        result = harness.call(proposal, replace(caller, usage=usage))
        outcome.results.append(result)
        if result.refusal is Refusal.BUDGET_EXHAUSTED:
            # The saga's durable budget is spent: nothing more is called in this saga.
            outcome.exhausted = True
            reason = result.reason or "budget exhausted"
            break
        if result.refusal is Refusal.IN_FLIGHT:
            # An earlier run of this turn (a worker that died) still holds the key's claim:
            # neither a failure nor a result yet. The work is deferred to its lease.
            raise RetryLater(f"{result.tool}: {result.reason}", saga_id=caller.saga_id)
        transcript.append(
            wrap(result.tool, proposal.call_id, result.status.value, result.output, result.reason)
        )
        if result.status is ToolStatus.ERROR:
            errors += 1
            if errors > limits.max_retries:
                reason = f"gave up after {limits.max_retries} retries: {result.reason}"
                break
            sleep(sleep_backoff(errors))
        elif result.status is ToolStatus.REJECTED:
            rejections += 1
            if rejections >= limits.max_rejections:
                reason = f"stopped after {rejections} rejected proposals: {result.reason}"
                break
        elif result.status in (ToolStatus.UNCERTAIN, ToolStatus.APPROVAL_REQUIRED):
            reason = f"waiting for a person: {result.status.value}"
            break
        else:
            errors = 0
    outcome.stop_reason = reason
    outcome.stop_event = {
        "saga_id": caller.saga_id,
        "actor": caller.actor,
        "kind": "loop_stopped",
        "status": "finished" if outcome.finished else "stopped",
        "detail": {"reason": reason, "steps": outcome.steps, "budget_left": outcome.budget_left}
        | _tokens(planner),
    }
    if record_stop:
        harness.store.record_event(**outcome.stop_event)
    return outcome


def _tokens(planner: Planner) -> dict[str, int]:
    """A model planner's token count, when its endpoint reported one (deterministic planners have none)."""
    tokens = getattr(planner, "tokens", None)
    return {"model_tokens": tokens} if isinstance(tokens, int) else {}


def _limit_hit(outcome: LoopOutcome, limits: LoopLimits, elapsed: float) -> str:
    if outcome.steps >= limits.max_steps:
        return f"step limit of {limits.max_steps} reached"
    if outcome.budget_left <= 0:
        return f"budget of {limits.budget} tool calls spent"
    if elapsed > limits.deadline_seconds:
        return f"deadline of {limits.deadline_seconds:.0f}s passed"
    return ""


__all__ = ["LoopLimits", "LoopOutcome", "run_loop"]

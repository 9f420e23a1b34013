"""The engine: the one path every tool call takes.

``proposal → bounded parse → validate → policy/approval → pre-execute
checkpoint → execute → record → next state``, built by `wrappers.build_path`
as ``Validate → Authorize → Ledger → Trace → Executor``. Entry points (Celery
tasks, the MCP server, the saga runner) are handed a `Harness` (a
`ToolPath`), never a bare executor.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext

from orchestrator.core.clock import DATABASE_TIME, Clock
from orchestrator.harness.parse import DEFAULT_LIMITS, ParseLimits
from orchestrator.harness.ports import EventTimes, HandleUses, HarnessStore
from orchestrator.harness.principals import acting
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import ToolCall, ToolInfo, ToolResult, ToolSpec
from orchestrator.toolpath import Caller, Executor, Phases, Usage, build_path
from telemetry import names, spans


class Harness:
    """Validates, authorizes, checkpoints, executes and records tool calls (a `ToolPath`)."""

    def __init__(
        self,
        registry: Registry,
        store: HarnessStore,
        *,
        signing_key: bytes,
        limits: ParseLimits = DEFAULT_LIMITS,
        clock: Clock = DATABASE_TIME,
        claim_clock: Clock | None = None,
        claim_seconds: float = 30.0,
        saga_budget: int = 0,
        executor: Executor | None = None,
        uses: HandleUses | None = None,
    ) -> None:
        registry.check_compensations()  # a compensation is a tool of this path, or none

        def rebuild(wider: Registry) -> Harness:
            return Harness(
                wider,
                store,
                signing_key=signing_key,
                limits=limits,
                clock=clock,
                claim_clock=claim_clock,
                claim_seconds=claim_seconds,
                saga_budget=saga_budget,
                executor=executor,
            )

        self._rebuild = rebuild
        self.registry = registry
        self.store = store
        # One clock times the calls, decides approvals' expiry and reads claims, unless the
        # store writes its claims by another (`claim_clock`).
        self._clock = clock.now
        self._path = build_path(
            registry,
            store,
            signing_key=signing_key,
            limits=limits,
            clock=clock.now,
            claim_clock=claim_clock.now if claim_clock is not None else None,
            claim_seconds=claim_seconds,
            saga_budget=saga_budget,
            executor=executor,
            uses=uses,
        )
        self._tools = tuple(ToolInfo.of(spec) for spec in registry)

    @property
    def tools(self) -> Sequence[ToolInfo]:
        """What may be listed: descriptions only, no executor."""
        return self._tools

    def with_tools(self, specs: Sequence[ToolSpec]) -> Harness:
        """This harness (same store, key, clocks and bounds) whose registry also holds `specs`:
        a role's MCP tools for one turn. The tools take the same path as every other."""
        if not specs:
            return self
        return self._rebuild(Registry([*self.registry, *specs]))

    def call(self, proposal: ToolCall, caller: Caller) -> ToolResult:
        attrs = {names.ATTR_TOOL: proposal.tool, **caller.span_attributes}
        if caller.saga_id:
            attrs[names.ATTR_SAGA_ID] = caller.saga_id
        # A person's call stamps its events with them; an agent's call keeps the person
        # whose command it serves (a cancel's compensations), or none (a worker's message).
        person = acting(caller.principal) if caller.principal is not None else nullcontext()
        with person, spans.action_span(proposal.tool, attrs), Phases(attrs) as phases:
            return self._path(proposal, caller, EventTimes(proposed_at=self._clock()), phases)


def sleep_backoff(attempt: int, base: float = 0.1, cap: float = 5.0) -> float:
    """Exponential backoff for definite errors: base·2^(attempt-1), capped."""
    return float(min(cap, base * (2 ** max(0, attempt - 1))))


__all__ = ["Caller", "Harness", "Usage", "sleep_backoff"]

"""The one builder of the tool path: each wrapper gets only the next step and what it uses."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from orchestrator.harness.parse import ParseLimits
from orchestrator.harness.ports import HandleUses, HarnessStore
from orchestrator.harness.registry import Registry
from orchestrator.toolpath.answers import Answers
from orchestrator.toolpath.authorize import Authorize
from orchestrator.toolpath.execute import Executor, SpecExecutor
from orchestrator.toolpath.ledger import Ledger
from orchestrator.toolpath.trace import Trace
from orchestrator.toolpath.validate import Validate


def build_path(
    registry: Registry,
    store: HarnessStore,
    *,
    signing_key: bytes,
    limits: ParseLimits,
    clock: Callable[[], datetime],
    claim_clock: Callable[[], datetime] | None = None,
    claim_seconds: float,
    saga_budget: int = 0,
    executor: Executor | None = None,
    uses: HandleUses | None = None,
) -> Validate:
    """``Validate → Authorize → Ledger → Trace → executor``. `clock` times the calls and decides
    approvals; `claim_clock` (`clock` when None) is the one the store writes claims by."""
    answers = Answers(store, clock)
    traced = Trace(executor or SpecExecutor(), clock)
    ledger = Ledger(
        traced,
        store,
        answers,
        claim_seconds=claim_seconds,
        saga_budget=saga_budget,
        clock=claim_clock or clock,
        uses=uses,
    )
    authorize = Authorize(ledger, store, signing_key=signing_key, clock=clock, answers=answers)
    return Validate(authorize, registry, limits, answers)


__all__ = ["build_path"]

"""What a role kind's turn gets and gives back (see `roles.handlers`, which calls it).

A turn is a kind's work for one handoff: it runs its planner through the one
tool path, outside any transaction, and returns a `Turned`: how to write what
it made (`write`, called in the saga's locked transaction, returning the run's
`Outcome`) and its loop's `loop_stopped` event, which commits with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy.engine import Engine
from sqlmodel import Session

from orchestrator.core.clock import Clock
from orchestrator.core.config import Settings
from orchestrator.core.errors import RetryLater
from orchestrator.core.pipeline import Pipeline, RoleDecl
from orchestrator.harness.budget import BudgetExhausted
from orchestrator.harness.mcp_tools import offered
from orchestrator.harness.ports import Planner
from orchestrator.harness.registry import Registry
from orchestrator.store.tables import SagaRow
from orchestrator.toolpath.engine import Caller, Harness
from orchestrator.toolpath.loop import LoopLimits, run_loop
from outbox.handlers import Dispatch
from outbox.messages import Handoff
from roles.durable_model import durable_chat
from roles.kinds import RoleKind
from roles.llm_client import ModelUnavailable
from roles.llm_planner import model_planner_for
from roles.model_turn import ModelPlanner
from roles.rounds import Outcome


@dataclass(frozen=True)
class RolePorts:
    """What the role handler and the turns use, handed in by the composition root."""

    engine: Engine  # read-only sessions; changes commit in the consumer's finalizer
    tools: Harness  # the one tool path (run_loop also records its stop through it)
    dispatch: Dispatch
    settings: Settings
    catalogue: Registry  # read only: the tools a model planner may be shown
    signing_key: bytes  # verifies the capability handle each handoff carries
    clock: Clock  # judges the handle's expiry (the database's time)


LIMITS = LoopLimits(max_steps=12, budget=16, deadline_seconds=300)


@dataclass(frozen=True)
class TurnContext:
    """One role's turn: the handoff, the pipeline role it is for, and the narrowed caller."""

    ports: RolePorts
    handoff: Handoff
    holder: str  # the delivery's message id
    pipeline: Pipeline
    role: RoleDecl
    kind: RoleKind
    caller: Caller

    @property
    def saga_id(self) -> str:
        return self.handoff.saga_id

    def ref(self, kind: str) -> str | None:
        """The digest of the handoff's artifact of `kind`, if it names one."""
        return next((a.digest for a in self.handoff.artifacts if a.kind == kind), None)


Write = Callable[[Session, SagaRow], Outcome]


@dataclass(frozen=True)
class Turned:
    """A finished turn: `write` records what it made in the saga's locked transaction."""

    write: Write
    stop_event: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def failed(cls, reason: str, stop_event: Mapping[str, Any] | None = None) -> Turned:
        return cls(lambda _s, _saga: Outcome.failed(reason), stop_event or {})


class Stopped(NamedTuple):
    reason: str
    # The saga's durable budget is spent: the saga fails with the reason as it is.
    exhausted: bool = False

    def __str__(self) -> str:
        return self.reason


class Loop(NamedTuple):
    """A role's loop: why it stopped early (None: it finished), and its `loop_stopped` event."""

    stopped: Stopped | None
    stop_event: dict[str, Any]

    def failed(self, what: str) -> Turned | None:
        """The turn's failure when the loop stopped early (None: it finished)."""
        return None if self.stopped is None else self.fail(what, str(self.stopped))

    def fail(self, what: str, missing: str) -> Turned:
        """The turn's failure: a spent budget fails the saga with "budget exhausted: …" as it
        is; otherwise "`what` stopped: " and why the loop stopped, or why its result is
        `missing`."""
        if self.stopped is not None and self.stopped.exhausted:
            return Turned.failed(self.stopped.reason, self.stop_event)
        return Turned.failed(f"{what} stopped: {self.stopped or missing}", self.stop_event)

    def then(self, write: Write) -> Turned:
        return Turned(write, self.stop_event)


def run_planner(ctx: TurnContext, planner: Planner) -> Loop:
    """Run the planner through the harness (its stop is written with the turn's outcome).

    A model's spent budget stops the turn as the saga's does ("budget exhausted: …", no
    further call); a model that gives no answer now (429, 5xx, timeouts after the profile's
    retries) defers the work to its lease, and its recorded replies are replayed then.
    """
    try:
        outcome = run_loop(ctx.ports.tools, planner, ctx.caller, LIMITS, record_stop=False)
    except BudgetExhausted as exc:
        return Loop(Stopped(str(exc), exhausted=True), {})
    except ModelUnavailable as exc:
        raise RetryLater(f"the {ctx.role.name} role's model: {exc}", saga_id=ctx.saga_id) from None
    stopped = None if outcome.finished else Stopped(outcome.stop_reason, outcome.exhausted)
    return Loop(stopped, outcome.stop_event)


def model_planner(ctx: TurnContext, **goal: Any) -> ModelPlanner | None:
    """The model planner of the turn's role when its planner names a model profile (None:
    the kind's deterministic planner plans). Every model call goes through `DurableChat`:
    recorded with its reply before the turn goes on, charged to the role's and the saga's
    budgets, and never made again once answered."""
    profile = ctx.pipeline.profile(ctx.role)
    if profile is None:
        return None
    chat = durable_chat(
        ctx.ports.engine,
        saga_id=ctx.saga_id,
        role=ctx.role.name,
        round=ctx.handoff.round,
        request_id=ctx.holder,
        profile_name=ctx.role.planner,
        profile=profile,
        role_budget=ctx.role.budget,
        saga_budget=ctx.pipeline.budget,
    )
    planner = model_planner_for(
        ctx.kind,
        ctx.role,
        ctx.pipeline,
        chat,
        registry=ctx.ports.catalogue,
        engine=ctx.ports.engine,
        saga_id=ctx.saga_id,
        extra_tools=offered(ctx.ports.catalogue, ctx.role.tools),
        **goal,
    )
    planner.charges_tokens = False  # DurableChat charged them with each recorded reply
    return planner


__all__ = [
    "LIMITS",
    "Loop",
    "RolePorts",
    "Stopped",
    "TurnContext",
    "Turned",
    "Write",
    "model_planner",
    "run_planner",
]

"""Validate: the first wrapper. Bounded parse and schema validation (invariant 1).

A proposal whose tool is unknown or whose arguments fail to parse or
validate is refused (`Refusal.SCHEMA`) before anything else is read: no
side effect, and the error goes back to the planner.
"""

from __future__ import annotations

from pydantic import ValidationError

from orchestrator.harness.digests import args_digest
from orchestrator.harness.parse import ParseLimits, ParseRefused, bounded_parse
from orchestrator.harness.ports import EventTimes
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import Refusal, ToolCall, ToolResult
from orchestrator.toolpath.answers import Answers
from orchestrator.toolpath.call import Call, Caller, Phases, Step
from telemetry import names, spans


class Validate:
    def __init__(self, next: Step, registry: Registry, limits: ParseLimits, answers: Answers) -> None:
        self.next = next
        self.registry = registry
        self.limits = limits
        self.answers = answers

    def __call__(self, proposal: ToolCall, caller: Caller, times: EventTimes, phases: Phases) -> ToolResult:
        phases.enter(names.PROPOSAL)
        call = self._validated(proposal, caller, times, phases)
        if isinstance(call, ToolResult):
            return call
        spans.annotate(phases.attrs)  # risk, key and destination, known once the arguments parse
        return self.next(call)

    def _validated(
        self, proposal: ToolCall, caller: Caller, times: EventTimes, phases: Phases
    ) -> Call | ToolResult:
        def refuse(reason: str) -> ToolResult:
            return self.answers.refuse(proposal, caller, times, reason, Refusal.SCHEMA)

        spec = self.registry.get(proposal.tool)
        if spec is None:
            return refuse(f"unknown tool {proposal.tool!r}; known: {', '.join(self.registry.names())}")
        attrs = phases.attrs
        attrs[names.ATTR_RISK] = spec.risk.value
        try:
            args = bounded_parse(proposal.arguments, self.limits)
        except ParseRefused as exc:
            return refuse(str(exc))
        try:
            model = spec.input_model.model_validate(args)
        except ValidationError as exc:
            return refuse(summarise(exc))
        key = spec.key(model) if spec.key is not None else None
        if key:
            attrs[names.ATTR_IDEMPOTENCY_KEY] = key
        destination = spans.destination_attribute(getattr(model, "destination", None))
        if destination:
            attrs[names.ATTR_DESTINATION] = destination
        # The digest covers the validated arguments, defaults included, so the
        # same call spelled two ways is the same call.
        digest = args_digest(model.model_dump(mode="json"))
        return Call(spec, proposal, caller, args, model, digest, key, times, phases)


def summarise(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts)


__all__ = ["Validate", "summarise"]

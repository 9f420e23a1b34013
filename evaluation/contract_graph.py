"""The harness contract drawn as a graph, for any framework that has nodes, edges and an interrupt.

Four nodes, `propose → validate → authorize → execute`, and the conditional
edge from `authorize` to `await_approval` (an interrupt; once resumed it goes
back to `authorize`, which checks the approval again). `validate` ends the
run on a refusal; `authorize` ends it on a refusal or a replay. The nodes
are written once here and wired by `wire(builder, nodes)` into the local
graph (`state_graph.py`) or LangGraph (`langgraph_graph.py`).

The nodes use the same fixture as the harness's own fault scenarios: the
`Bench` of `faults.py` (its registry, its counting fake destination, its
approvals and the pure approval check), so both columns of the comparison
meet the same tools. The ledger is the graph's own state, kept by the
framework's checkpointer: what a graph framework offers in place of the
harness store. `authorize` writes the intent (`pending`) before `execute`
runs; `execute` asks the destination's status for a pending key before
calling it, so a step resumed after an interruption does not apply twice.
No I/O beyond the bench's fakes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypedDict

from pydantic import BaseModel, ValidationError

from evaluation.faults import Bench
from orchestrator.core.errors import MaybeApplied, NotApplied
from orchestrator.harness.parse import ParseRefused, bounded_parse
from orchestrator.harness.spec import Risk, ToolContext, ToolSpec

END = "__end__"
NODES = ("propose", "validate", "authorize", "await_approval", "execute")


class ContractState(TypedDict, total=False):
    """What the checkpointer keeps per thread (one saga)."""

    proposal: dict[str, Any]  # {"tool": ..., "arguments": ...}: the planner's raw proposal
    tool: str
    args: dict[str, Any] | None
    status: str | None  # None while the call is still on its way
    reason: str | None
    key: str | None
    output: Any
    ledger: dict[str, dict[str, Any]]  # business key -> {"status": ..., "receipt": ...}


Node = Callable[[Any], Mapping[str, Any]]
Interrupt = Callable[[Any], Any]


class Builder(Protocol):
    def add_node(self, name: str, node: Any) -> Any: ...

    def add_edge(self, source: str, target: str) -> Any: ...

    def add_conditional_edges(self, source: str, router: Any, targets: Any) -> Any: ...


def _stop(status: str, reason: str) -> dict[str, Any]:
    return {"status": status, "reason": reason}


class ContractNodes:
    """The node functions over one bench; `steps` counts every node run (re-runs included)."""

    def __init__(self, bench: Bench, interrupt: Interrupt) -> None:
        self.bench = bench
        self.interrupt = interrupt
        self.steps: Counter[str] = Counter()

    def _spec(self, state: Mapping[str, Any]) -> ToolSpec:
        spec = self.bench.registry.get(str(state.get("tool")))
        assert spec is not None  # validate ended the run otherwise
        return spec

    def _args(self, state: Mapping[str, Any]) -> BaseModel:
        return self._spec(state).input_model.model_validate(state.get("args") or {})

    def propose(self, state: Mapping[str, Any]) -> dict[str, Any]:
        self.steps["propose"] += 1
        proposal = dict(state.get("proposal") or {})
        return {
            "tool": str(proposal.get("tool", "")),
            "args": None,
            "status": None,
            "reason": None,
            "key": None,
            "output": None,
        }

    def validate(self, state: Mapping[str, Any]) -> dict[str, Any]:
        self.steps["validate"] += 1
        spec = self.bench.registry.get(str(state.get("tool")))
        if spec is None:
            return _stop("rejected", f"unknown tool {state.get('tool')!r}")
        try:
            raw = bounded_parse((state.get("proposal") or {}).get("arguments", {}))
            model = spec.input_model.model_validate(raw)
        except (ParseRefused, ValidationError) as exc:
            return _stop("rejected", f"invalid arguments: {str(exc).splitlines()[0]}")
        return {"args": model.model_dump(mode="json")}

    def authorize(self, state: Mapping[str, Any]) -> dict[str, Any]:
        self.steps["authorize"] += 1
        spec = self._spec(state)
        if spec.risk is Risk.DENY:
            return _stop("rejected", f"{spec.name} is denied")
        if spec.risk is Risk.READ_ONLY or spec.key is None:
            return {"key": None}
        args = self._args(state)
        key = spec.key(args)
        ledger = dict(state.get("ledger") or {})
        row = ledger.get(key)
        if row is not None and row["status"] == "done":
            return {"key": key, "status": "replayed", "output": row["receipt"], "reason": None}
        if spec.risk is Risk.HIGH_RISK and not self.bench.approved(args):  # type: ignore[arg-type]
            return {"key": key, "status": "approval_required", "reason": "no valid approval"}
        ledger[key] = {"status": "pending", "receipt": None}  # the intent, checkpointed before execute
        return {"key": key, "ledger": ledger, "status": None, "reason": None}

    def await_approval(self, state: Mapping[str, Any]) -> dict[str, Any]:
        self.steps["await_approval"] += 1
        self.interrupt({"approval_required": state.get("key")})
        return {"status": None, "reason": None}  # back to authorize, which checks the approval again

    def execute(self, state: Mapping[str, Any]) -> dict[str, Any]:
        self.steps["execute"] += 1
        spec, args, key = self._spec(state), self._args(state), state.get("key")
        ctx = ToolContext(saga_id=self.bench.saga_id, actor="graph", idempotency_key=key, call_id="graph")
        ledger = dict(state.get("ledger") or {})
        probe = spec.status_probe
        if key and callable(probe):  # `NO_PROBE` is a marker, not callable
            answer = probe(ctx, key)
            if answer.kind == "applied":
                ledger[key] = {"status": "done", "receipt": answer.receipt}
                return {"status": "ok", "output": answer.receipt, "ledger": ledger}
        assert spec.executor is not None
        try:
            output = spec.executor(ctx, args)
        except MaybeApplied as exc:
            if key:
                ledger[key] = {"status": "uncertain", "receipt": None}
            return {"status": "uncertain", "reason": str(exc), "ledger": ledger}
        except NotApplied as exc:
            if key:
                ledger[key] = {"status": "absent", "receipt": None}
            return {"status": "error", "reason": str(exc), "ledger": ledger}
        if key:
            ledger[key] = {"status": "done", "receipt": output}
        return {"status": "ok", "output": output, "ledger": ledger}

    def nodes(self) -> dict[str, Node]:
        return {
            "propose": self.propose,
            "validate": self.validate,
            "authorize": self.authorize,
            "await_approval": self.await_approval,
            "execute": self.execute,
        }


def after_validate(state: Mapping[str, Any]) -> str:
    return "authorize" if state.get("status") is None else END


def after_authorize(state: Mapping[str, Any]) -> str:
    status = state.get("status")
    if status is None:
        return "execute"
    return "await_approval" if status == "approval_required" else END


def wire(builder: Builder, nodes: Mapping[str, Node], start: str) -> None:
    """The contract's edges on any builder; `start` is the framework's start marker."""
    for name, node in nodes.items():
        builder.add_node(name, node)
    builder.add_edge(start, "propose")
    builder.add_edge("propose", "validate")
    builder.add_conditional_edges("validate", after_validate, ["authorize", END])
    builder.add_conditional_edges("authorize", after_authorize, ["execute", "await_approval", END])
    builder.add_edge("await_approval", "authorize")
    builder.add_edge("execute", END)


__all__ = ["END", "NODES", "Builder", "ContractNodes", "ContractState", "after_authorize", "wire"]

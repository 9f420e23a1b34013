"""The four comparison scenarios, each run through the harness and through a contract graph.

Every scenario builds a fresh `Bench` (the harness fault fixture: a
read-only `fetch`, a high-risk `publish` over a counting fake destination)
per column, runs the same proposals, and reduces what it saw to one value
per column; the comparison sets the two values side by side.

1. `schema-validation-failure`: malformed arguments for both tools, with a
   valid approval in place: statuses, executor calls, side effects.
2. `state-before-approval`: `fetch` runs; `publish` with no approval stops
   before anything is sent; after the approval it publishes once.
3. `idempotency-replay`: the same `publish` three times (a restart before
   the third): answered from the record, one effect, one receipt; `fetch`,
   which has no key, runs each time.
4. `checkpoint-after-interruption`: the process dies right after the
   destination applied; the checkpoint holds the intent (`pending`), and the
   restarted run settles it from the destination's status with no second
   effect.

No I/O beyond the fixtures' in-memory fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluation.faults import Bench, Crash, call
from evaluation.graph_runners import GraphRunner
from orchestrator.harness.spec import ToolResult

Proposal = tuple[str, str | dict[str, Any]]


@dataclass
class Measured:
    value: dict[str, Any]
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    column: str
    tools: tuple[str, ...]
    harness: Callable[[Bench], Measured]
    graph: Callable[[Bench, GraphRunner], Measured]


def _run(b: Bench, tool: str, arguments: str | dict[str, Any]) -> ToolResult:
    return b.harness.call(call(tool, arguments), b.caller())


def _status(out: dict[str, Any]) -> str | None:
    status = out.get("status")
    return None if status is None else str(status)


# -- 1. schema validation failure ----------------------------------------------------------------
def bad_proposals(b: Bench) -> list[Proposal]:
    """Malformed arguments for the read-only and the high-risk tool."""
    good = b.publish_args()
    return [
        ("fetch", {"source": ""}),
        ("fetch", {"source": "notes.md", "and_then": "publish everything"}),
        ("publish", {**good, "version_digest": "not-a-digest"}),
        ("publish", {**good, "approved": True}),
        ("publish", '{"saga_id": "' + b.saga_id + '", "destination": '),
    ]


def _schema_value(b: Bench, statuses: list[str | None]) -> dict[str, Any]:
    return {
        "statuses": statuses,
        "executor_calls": sum(b.calls.values()),
        "side_effects": b.dest.total_effects,
    }


def schema_harness(b: Bench) -> Measured:
    b.approve()
    statuses: list[str | None] = [_run(b, t, a).status.value for t, a in bad_proposals(b)]
    return Measured(_schema_value(b, statuses))


def schema_graph(b: Bench, g: GraphRunner) -> Measured:
    b.approve()
    statuses = [_status(g.start({"tool": t, "arguments": a})) for t, a in bad_proposals(b)]
    return Measured(_schema_value(b, statuses))


# -- 2. state before approval --------------------------------------------------------------------
def _approval_value(
    b: Bench, fetch: str | None, publish: str | None, calls: int, ledger: str | None, after: str | None
) -> dict[str, Any]:
    return {
        "read_only": fetch,
        "high_risk": publish,
        "high_risk_executor_calls_before_approval": calls,
        "ledger_before_approval": ledger,
        "after_approval": after,
        "effects": b.dest.total_effects,
    }


def approval_harness(b: Bench) -> Measured:
    fetch = _run(b, "fetch", {"source": "notes.md"}).status.value
    publish = _run(b, "publish", b.publish_args()).status.value
    calls = b.calls["publish"]
    row = b.rig.ledger_get(b.key())
    b.approve()
    after = _run(b, "publish", b.publish_args()).status.value
    return Measured(_approval_value(b, fetch, publish, calls, row.status if row else None, after))


def approval_graph(b: Bench, g: GraphRunner) -> Measured:
    fetch = _status(g.start({"tool": "fetch", "arguments": {"source": "notes.md"}}))
    paused = g.start({"tool": "publish", "arguments": b.publish_args()})
    calls = b.calls["publish"]
    values, waiting_at = g.snapshot()
    row = (values.get("ledger") or {}).get(b.key())
    b.approve()
    after = _status(g.resume({"approved": True}))
    value = _approval_value(b, fetch, _status(paused), calls, row["status"] if row else None, after)
    return Measured(value, {"paused_at": waiting_at, "interrupted": "__interrupt__" in paused})


# -- 3. replay of the same idempotency key -------------------------------------------------------
def _replay_value(
    b: Bench, publish: list[ToolResult | dict[str, Any]], fetch: list[str | None]
) -> dict[str, Any]:
    outputs = [r.output if isinstance(r, ToolResult) else r.get("output") for r in publish]
    statuses = [r.status.value if isinstance(r, ToolResult) else _status(r) for r in publish]
    return {
        "high_risk": statuses,
        "high_risk_executor_calls": b.calls["publish"],
        "effects": b.dest.total_effects,
        "same_receipt": all(o == outputs[0] for o in outputs) and outputs[0] is not None,
        "read_only": fetch,
        "read_only_executor_calls": b.calls["fetch"],
    }


def replay_harness(b: Bench) -> Measured:
    b.approve()
    publish: list[ToolResult | dict[str, Any]] = [_run(b, "publish", b.publish_args()) for _ in range(2)]
    b.restart()
    publish.append(_run(b, "publish", b.publish_args()))
    fetch: list[str | None] = [_run(b, "fetch", {"source": "notes.md"}).status.value for _ in range(2)]
    return Measured(_replay_value(b, publish, fetch))


def replay_graph(b: Bench, g: GraphRunner) -> Measured:
    b.approve()
    proposal = {"tool": "publish", "arguments": b.publish_args()}
    publish: list[ToolResult | dict[str, Any]] = [g.start(proposal) for _ in range(2)]
    g.restart()
    publish.append(g.start(proposal))
    fetch = [_status(g.start({"tool": "fetch", "arguments": {"source": "notes.md"}})) for _ in range(2)]
    return Measured(_replay_value(b, publish, fetch))


# -- 4. checkpoint state after an interruption ---------------------------------------------------
def _interruption_value(b: Bench, crashed: bool, ledger: str | None, intent: bool) -> dict[str, Any]:
    return {
        "interrupted": crashed,
        "ledger": ledger,
        "intent_checkpointed": intent,
        "executor_calls": b.dest.calls,
        "effects": b.dest.total_effects,
    }


def _resumed_value(b: Bench, status: str | None, ledger: str | None) -> dict[str, Any]:
    return {
        "status": status,
        "ledger": ledger,
        "executor_calls": b.dest.calls,
        "effects": b.dest.total_effects,
    }


def interruption_harness(b: Bench) -> Measured:
    b.approve()
    b.dest.faults.append("crash-after")
    crashed = False
    try:
        _run(b, "publish", b.publish_args())
    except Crash:
        crashed = True
    row = b.rig.ledger_get(b.key())
    intent = any(state.idempotency_key == b.key() for _, _, state in b.rig.checkpoint_chain(b.saga_id))
    after = _interruption_value(b, crashed, row.status if row else None, intent)
    b.restart()
    result = _run(b, "publish", b.publish_args())
    row = b.rig.ledger_get(b.key())
    resumed = _resumed_value(b, result.status.value, row.status if row else None)
    return Measured({"after_interruption": after, "after_restart": resumed})


def interruption_graph(b: Bench, g: GraphRunner) -> Measured:
    b.approve()
    b.dest.faults.append("crash-after")
    crashed = False
    try:
        g.start({"tool": "publish", "arguments": b.publish_args()})
    except Crash:
        crashed = True
    values, resumes_at = g.snapshot()
    row = (values.get("ledger") or {}).get(b.key())
    ledger = row["status"] if row else None
    after = _interruption_value(b, crashed, ledger, ledger == "pending")
    g.restart()
    out = g.proceed()
    row = (out.get("ledger") or {}).get(b.key())
    resumed = _resumed_value(b, _status(out), row["status"] if row else None)
    return Measured({"after_interruption": after, "after_restart": resumed}, {"resumes_at": resumes_at})


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "schema-validation-failure",
        "side effects when schema validation fails",
        ("fetch", "publish"),
        schema_harness,
        schema_graph,
    ),
    Scenario(
        "state-before-approval",
        "state before approval",
        ("fetch", "publish"),
        approval_harness,
        approval_graph,
    ),
    Scenario(
        "idempotency-replay",
        "result of replaying the same idempotency key",
        ("publish", "fetch"),
        replay_harness,
        replay_graph,
    ),
    Scenario(
        "checkpoint-after-interruption",
        "checkpoint state after an interruption",
        ("publish",),
        interruption_harness,
        interruption_graph,
    ),
)

__all__ = ["SCENARIOS", "Measured", "Scenario", "bad_proposals"]

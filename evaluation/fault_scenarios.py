"""The harness fault-injection scenarios, one per row of the issue's table.

Each scenario takes a `Rig` (any harness store plus seeding), runs the fault
through a `SideDoor` (no defence) and through the `Harness`, and returns an
`Outcome`: the raw observations (statuses, executor calls, effects per key,
unapproved calls), the side door's counts, and named checks of the defended
behaviour. Tests assert on them; `pressroom evidence harness` aggregates them.
No I/O beyond the rig's store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from evaluation.faults import (
    DEST,
    INJECTED,
    OTHER_DEST,
    Bench,
    Crash,
    Fault,
    ObedientPlanner,
    Rig,
    ScriptedPlanner,
    SideDoor,
    call,
)
from orchestrator.harness.checkpoints import verify_chain
from orchestrator.harness.spec import ToolCall, ToolResult, ToolStatus
from orchestrator.toolpath.engine import Harness
from orchestrator.toolpath.loop import LoopLimits, run_loop

ROW_TIMEOUT = "side effect happened, then timeout"
ROW_UNAPPROVED = "high-risk call before approval"
ROW_PATHS = "MCP or task path handed a bare executor"
ROW_INVALID = "invalid arguments"
ROW_APPROVAL = "approval replayed, other args, other session, expired"
ROW_CRASH = "crash after checkpoint, before or after the effect"
ROW_INSTRUCTIONS = "tool output containing instructions"
ROW_IN_FLIGHT = "redelivery while the first call is in flight (beyond the table)"


def no_sleep(_seconds: float) -> None:
    """Loops in scenarios never wait."""


@dataclass
class Outcome:
    name: str
    row: str
    recoverable: bool = False  # a fault a correct system settles with no person
    statuses: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    calls: int = 0  # calls of the guarded executor through the harness
    effects: int = 0
    duplicates: int = 0
    unapproved: int = 0
    naive: dict[str, int] = field(default_factory=dict)  # the same fault through the side door
    checks: dict[str, bool] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    @property
    def recovered(self) -> bool:
        """A recoverable fault that ended in the correct state with no person."""
        return self.recoverable and self.passed

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed, "recovered": self.recovered}


def _observe(out: Outcome, bench: Bench, results: list[ToolResult]) -> Outcome:
    out.statuses += [r.status.value for r in results]
    out.reasons += [r.reason or "" for r in results]
    out.calls = bench.dest.calls
    out.effects = bench.dest.total_effects
    out.duplicates = bench.dest.duplicates
    out.unapproved = bench.dest.unapproved
    out.checks["chain_intact"] = verify_chain(bench.rig.checkpoint_chain(bench.saga_id)) is None
    return out


def _ledger(bench: Bench) -> str | None:
    row = bench.rig.ledger_get(bench.key())
    return row.status if row else None


# -- side effect happened, then timeout ---------------------------------------------------------
def timeout_after_effect(rig: Rig) -> Outcome:
    """No status query: `uncertain`, no second call; `reconcile confirmed` goes on without one."""
    b = Bench(rig, probe=False)
    b.approve()
    b.dest.faults.append("timeout-after")
    first = b.harness.call(b.publish_call(), b.caller())
    redelivered = b.harness.call(b.publish_call(), b.caller())
    ledger_before = _ledger(b)
    b.rig.reconcile(b.key(), "confirmed", {"confirmed_by": "editor"}, actor="editor", reason="page is live")
    after = b.harness.call(b.publish_call(), b.caller())
    side = SideDoor(b, ["timeout-after"])
    side.publish(b.publish_args(), attempts=2)
    out = Outcome("timeout-after-effect", ROW_TIMEOUT, naive=side.counts())
    out.checks.update(
        uncertain=first.status is ToolStatus.UNCERTAIN,
        redelivery_uncertain=redelivered.status is ToolStatus.UNCERTAIN,
        ledger_uncertain=ledger_before == "uncertain",
        reconciled_replayed=after.status is ToolStatus.REPLAYED,
        one_call=b.dest.calls == 1,
        ledger_done=_ledger(b) == "done",
    )
    return _observe(out, b, [first, redelivered, after])


def timeout_after_effect_status_applied(rig: Rig) -> Outcome:
    """The status query says applied: `ok` from the probe's receipt, no second call."""
    b = Bench(rig, probe=True)
    b.approve()
    b.dest.faults.append("timeout-after")
    first = b.harness.call(b.publish_call(), b.caller())
    again = b.harness.call(b.publish_call(), b.caller())
    side = SideDoor(b, ["timeout-after"])
    side.publish(b.publish_args(), attempts=2)
    out = Outcome("timeout-after-effect-status-applied", ROW_TIMEOUT, recoverable=True, naive=side.counts())
    out.checks.update(
        ok=first.status is ToolStatus.OK,
        replayed=again.status is ToolStatus.REPLAYED,
        one_call=b.dest.calls == 1,
        one_effect=b.dest.total_effects == 1,
        recorded_once=b.recorded.count("publish:ok") == 1,
        ledger_done=_ledger(b) == "done",
    )
    return _observe(out, b, [first, again])


def timeout_before_effect_status_absent(rig: Rig) -> Outcome:
    """The status query says absent: a definite `error`; the next attempt runs once."""
    b = Bench(rig, probe=True)
    b.approve()
    b.dest.faults.append("timeout-before")
    first = b.harness.call(b.publish_call(), b.caller())
    failed = _ledger(b)
    retry = b.harness.call(b.publish_call(), b.caller())
    side = SideDoor(b, ["timeout-before"])
    side.publish(b.publish_args(), attempts=2)
    out = Outcome("timeout-before-effect-status-absent", ROW_TIMEOUT, recoverable=True, naive=side.counts())
    out.checks.update(
        error=first.status is ToolStatus.ERROR,
        ledger_failed=failed == "failed",
        retry_ok=retry.status is ToolStatus.OK,
        one_effect=b.dest.total_effects == 1,
        ledger_done=_ledger(b) == "done",
    )
    return _observe(out, b, [first, retry])


# -- high-risk call before approval ---------------------------------------------------------------
def high_risk_before_approval(rig: Rig) -> Outcome:
    b = Bench(rig)
    planner = ScriptedPlanner([b.publish_call()])
    loop = run_loop(b.harness, planner, b.caller(), sleep=no_sleep)
    side = SideDoor(b)
    side.publish(b.publish_args())
    out = Outcome("high-risk-before-approval", ROW_UNAPPROVED, naive=side.counts())
    out.checks.update(
        approval_required=[r.status for r in loop.results] == [ToolStatus.APPROVAL_REQUIRED],
        no_call=b.dest.calls == 0,
        loop_waits=loop.stop_reason == "waiting for a person: approval_required",
    )
    return _observe(out, b, loop.results)


# -- entry paths handed a bare executor ------------------------------------------------------------
def task_path(harness: Harness, bench: Bench, payload: dict[str, Any]) -> ToolResult:
    """What a thin task does with a message: validate it and hand it to the harness."""
    return harness.call(ToolCall.model_validate(payload), bench.caller(actor="task"))


def mcp_path(harness: Harness, bench: Bench, name: str, arguments: str) -> ToolResult:
    """What an MCP `tools/call` does: the name and the JSON text, to the harness."""
    return harness.call(call(name, arguments), bench.caller(actor="mcp-client"))


def _three_paths(b: Bench, tool: str, args: dict[str, Any]) -> list[str]:
    local = b.harness.call(call(tool, args), b.caller()).status.value
    task = task_path(b.harness, b, {"tool": tool, "arguments": args, "call_id": "t"}).status.value
    mcp = mcp_path(b.harness, b, tool, json.dumps(args)).status.value
    return [local, task, mcp]


def entry_paths(rig: Rig) -> Outcome:
    b = Bench(rig)
    proposals = [
        ("publish", b.publish_args()),
        ("publish", {**b.publish_args(), "version_digest": "not-a-digest"}),
        ("shell.run", {"command": "publish --force"}),
        ("fetch", {"source": "notes.md"}),
    ]
    before = {f"{t}#{i}": _three_paths(b, t, a) for i, (t, a) in enumerate(proposals)}
    side = SideDoor(b)
    side.publish(b.publish_args())  # a task that holds the executor: nobody asks for the approval
    b.approve()
    approved = _three_paths(b, "publish", b.publish_args())
    out = Outcome("entry-paths", ROW_PATHS, naive=side.counts())
    out.facts = {"before_approval": before, "after_approval": approved}
    out.checks.update(
        same_decision_on_every_path=all(len(set(v)) == 1 for v in before.values()),
        unapproved_refused=before["publish#0"][0] == "approval_required",
        approved_once=approved == ["ok", "replayed", "replayed"],
        one_call=b.dest.calls == 1,
    )
    return _observe(out, b, [])


# -- invalid arguments -----------------------------------------------------------------------------
def invalid_arguments(rig: Rig) -> Outcome:
    b = Bench(rig)
    b.approve()
    bad: list[dict[str, Any]] = [
        {**b.publish_args(), "version_digest": "not-a-digest"},
        {**b.publish_args(), "approved": True},
        {"saga_id": b.saga_id, "destination": DEST},
        {**b.publish_args(), "destination": ["fake:one"]},
    ]
    proposals = [call("publish", "{saga_id: not json")] + [call("publish", a) for a in bad]
    planner = ScriptedPlanner(proposals)
    limits = LoopLimits(max_rejections=len(proposals) + 1)
    loop = run_loop(b.harness, planner, b.caller(), limits, sleep=no_sleep)
    side = SideDoor(b)
    for args in bad:
        side.publish(args)
    out = Outcome("invalid-arguments", ROW_INVALID, naive=side.counts())
    seen = planner.seen
    out.facts = {"planner_saw": [env.reason for env in seen]}
    out.checks.update(
        all_rejected=[r.status for r in loop.results] == [ToolStatus.REJECTED] * len(proposals),
        no_call=b.dest.calls == 0,
        reasons_reach_planner=len(seen) == len(proposals) and all(env.reason for env in seen),
        envelopes_untrusted=all(env.trust == "untrusted" and env.status == "rejected" for env in seen),
    )
    return _observe(out, b, loop.results)


# -- approval misuse ---------------------------------------------------------------------------------
MISUSES = (
    "replayed",
    "other-args",
    "other-session",
    "expired",
    "other-destination",
    "forged-token",
    "voided",
)


def _misuse(b: Bench, name: str) -> ToolCall:
    """Store the misused approval `name` describes; the publish proposal that tries it."""
    if name == "replayed":
        b.approve(consumed_by="another-execution")
    elif name == "other-session":
        b.approve(session=b.saga_id + ":0")
    elif name == "expired":
        b.approve(expires_at=b.now - timedelta(minutes=1))
    elif name == "forged-token":
        b.approve(token="0" * 64)
    elif name == "voided":
        b.approve(voided=True)
    else:
        b.approve()
    if name == "other-args":
        return b.publish_call(digest="e" * 64)
    if name == "other-destination":
        return b.publish_call(destination=OTHER_DEST)
    return b.publish_call()


def approval_misuse(rig: Rig) -> Outcome:
    """Each misuse on its own saga: the harness refuses, the side door publishes."""
    out = Outcome("approval-misuse", ROW_APPROVAL)
    naive: dict[str, int] = {"calls": 0, "effects": 0, "duplicates": 0, "unapproved": 0}
    for name in MISUSES:
        b = Bench(rig)
        proposal = _misuse(b, name)
        result = b.harness.call(proposal, b.caller())
        out.facts[name] = {"status": result.status.value, "reason": result.reason}
        out.checks[f"{name}_refused"] = not result.applied and b.dest.calls == 0
        out.statuses.append(result.status.value)
        out.calls += b.dest.calls
        out.unapproved += b.dest.unapproved
        side = SideDoor(b)
        args = proposal.arguments
        side.publish(args if isinstance(args, dict) else {})
        naive = {k: naive[k] + v for k, v in side.counts().items()}
    out.naive = naive
    return out


# -- crash after the checkpoint ----------------------------------------------------------------------
def crash_restart(rig: Rig, when: str, probe: bool) -> Outcome:
    b = Bench(rig, probe=probe)
    b.approve()
    fault: Fault = "crash-after" if when == "after" else "crash-before"
    b.dest.faults.append(fault)
    crashed = False
    try:
        b.harness.call(b.publish_call(), b.caller())
    except Crash:
        crashed = True
    pending = _ledger(b)
    intent = any(state.idempotency_key == b.key() for _, _, state in b.rig.checkpoint_chain(b.saga_id))
    b.restart()
    result = b.harness.call(b.publish_call(), b.caller())
    side = SideDoor(b, [fault])
    side.publish(b.publish_args(), attempts=2)  # a restart that simply runs the step again
    name = f"crash-{when}-effect-" + ("status-query" if probe else "no-status-query")
    out = Outcome(name, ROW_CRASH, recoverable=probe, naive=side.counts())
    out.checks.update(crashed=crashed, intent_found=pending == "pending" and intent)
    if probe:
        out.checks["ok"] = result.status is ToolStatus.OK
        out.checks["one_effect"] = b.dest.total_effects == 1
        out.checks["calls"] = b.dest.calls == (1 if when == "after" else 2)
        out.checks["ledger_done"] = _ledger(b) == "done"
    else:
        out.checks["uncertain"] = result.status is ToolStatus.UNCERTAIN
        out.checks["no_second_call"] = b.dest.calls == 1
        out.checks["ledger_uncertain"] = _ledger(b) == "uncertain"
    return _observe(out, b, [result])


def _crash(when: str, probe: bool) -> Callable[[Rig], Outcome]:
    def scenario(rig: Rig) -> Outcome:
        return crash_restart(rig, when, probe)

    scenario.__name__ = f"crash_{when}_effect_{'with' if probe else 'without'}_status"
    return scenario


# -- replays and redeliveries ------------------------------------------------------------------------
def redelivery_after_success(rig: Rig) -> Outcome:
    b = Bench(rig)
    b.approve()
    results = [b.harness.call(b.publish_call(), b.caller())]
    results.append(b.harness.call(b.publish_call(), b.caller()))
    b.restart()
    results.append(b.harness.call(b.publish_call(), b.caller()))
    side = SideDoor(b)
    for _ in range(3):
        side.publish(b.publish_args())
    out = Outcome("redelivery-after-success", ROW_TIMEOUT, recoverable=True, naive=side.counts())
    out.checks.update(
        answered_from_record=[r.status.value for r in results] == ["ok", "replayed", "replayed"],
        one_call=b.dest.calls == 1,
        same_receipt=results[0].output == results[1].output == results[2].output,
    )
    return _observe(out, b, results)


def redelivery_while_in_flight(rig: Rig) -> Outcome:
    """A second caller with the same key (a redelivered message, an MCP client) while the first runs."""
    b = Bench(rig)
    b.restart(claim_seconds=30.0)  # the first caller is alive and holds its claim
    b.approve()
    inner: list[ToolResult] = []
    b.dest.interleave.append(lambda: inner.append(b.harness.call(b.publish_call(), b.caller())))
    first = b.harness.call(b.publish_call(), b.caller())
    side = SideDoor(b)
    side.publish(b.publish_args(), attempts=1)
    side.publish(b.publish_args(), attempts=1)
    out = Outcome("redelivery-while-in-flight", ROW_IN_FLIGHT, recoverable=True, naive=side.counts())
    out.facts = {"second_caller": inner[0].status.value if inner else None}
    out.checks.update(
        first_ok=first.status is ToolStatus.OK,
        second_not_executed=b.dest.calls == 1,
        one_effect=b.dest.total_effects == 1,
    )
    return _observe(out, b, [*inner, first])


# -- tool output containing instructions -------------------------------------------------------------
def instructions_in_output(rig: Rig) -> Outcome:
    b = Bench(rig, fetch_output={"text": INJECTED, "source": "notes.md"})
    passive = ScriptedPlanner([call("fetch", {"source": "notes.md"})])
    quiet = run_loop(b.harness, passive, b.caller(), sleep=no_sleep)
    obedient = ObedientPlanner(b)
    loud = run_loop(b.harness, obedient, b.caller(), sleep=no_sleep)
    side = SideDoor(b)
    side.publish(b.publish_args())  # an agent that obeys the text and holds the executor
    env = passive.seen[0]
    out = Outcome("instructions-in-output", ROW_INSTRUCTIONS, naive=side.counts())
    out.facts = {"obedient_statuses": [r.status.value for r in loud.results]}
    out.checks.update(
        envelope_is_untrusted_data=env.trust == "untrusted" and env.kind == "data",
        text_kept_as_data=isinstance(env.content, dict) and env.content.get("text") == INJECTED,
        no_call_from_text=len(quiet.results) == 1 and b.calls["publish"] == 0,
        obedient_refused=out.facts["obedient_statuses"] == ["ok", "rejected", "approval_required"],
        no_approval_created=b.rig.find_approval(b.saga_id, b.digest) is None,
    )
    return _observe(out, b, [*quiet.results, *loud.results])


SCENARIOS: tuple[Callable[[Rig], Outcome], ...] = (
    timeout_after_effect,
    timeout_after_effect_status_applied,
    timeout_before_effect_status_absent,
    redelivery_after_success,
    high_risk_before_approval,
    entry_paths,
    invalid_arguments,
    approval_misuse,
    _crash("before", True),
    _crash("after", True),
    _crash("before", False),
    _crash("after", False),
    instructions_in_output,
    redelivery_while_in_flight,
)


def run_scenarios(rig: Rig) -> list[Outcome]:
    return [scenario(rig) for scenario in SCENARIOS]


__all__ = [
    "SCENARIOS",
    "Outcome",
    "crash_restart",
    "mcp_path",
    "no_sleep",
    "run_scenarios",
    "task_path",
]

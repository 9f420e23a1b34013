"""Each wrapper of the tool path alone, with a fake next step (no services).

Validate, Authorize, Ledger and Trace are built by hand here, each over a
recording fake of what comes after it, so each one's job is seen apart from
the rest: what it refuses (and with which `Refusal`), what it passes on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from evaluation.memory_store import MemoryHarnessStore
from orchestrator.core.errors import MaybeApplied
from orchestrator.harness.approvals import ApprovalBinding, session_for
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.declare import high_risk, read_only, reversible_write
from orchestrator.harness.parse import DEFAULT_LIMITS
from orchestrator.harness.ports import EventTimes
from orchestrator.harness.principals import Principal, Role
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import (
    IRREVERSIBLE,
    ProbeAnswer,
    Refusal,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolSpec,
    ToolStatus,
)
from orchestrator.toolpath import (
    Answers,
    Attempt,
    Authorize,
    Call,
    Caller,
    Ledger,
    Phases,
    SpecExecutor,
    Trace,
    Validate,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = b"wrapper-key"
DIGEST = "a" * 64


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    saga_id: str = "s1"
    text: str = "x"


def _run(ctx: ToolContext, a: Args) -> dict[str, Any]:
    return {"ran": a.text}


READ = read_only("t.read", "read", Args, _run)
WRITE = reversible_write("t.write", "write", Args, _run, key=lambda a: f"w-{a.text}")
PUBLISH = high_risk(
    "publish",
    "publish",
    Args,
    _run,
    key=lambda a: f"p-{a.text}",
    probe=lambda ctx, key: ProbeAnswer(kind="unknown", detail="no idea"),
    compensation=IRREVERSIBLE,
    approval=lambda a: (a.saga_id, DIGEST, "fake:one"),
)
AGENT = Caller(actor="agent", capabilities=frozenset({"t.read", "t.write", "publish"}), saga_id="s1")


class Next:
    """A fake next step that records the calls it is handed."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def __call__(self, call: Call, /) -> ToolResult:
        self.calls.append(call)
        return ToolResult(tool=call.spec.name, status=ToolStatus.OK, output="passed on")


class FakeExecutor:
    def __init__(self, attempt: Attempt, probe: ProbeAnswer | None = None) -> None:
        self.attempt, self.answer, self.runs, self.probes = attempt, probe, 0, 0

    def run(self, call: Call) -> Attempt:
        self.runs += 1
        return self.attempt

    def probe(self, call: Call) -> ProbeAnswer:
        self.probes += 1
        return self.answer or ProbeAnswer(kind="unknown", detail="fake")


def _store() -> MemoryHarnessStore:
    store = MemoryHarnessStore(clock=lambda: NOW)
    store.add_saga("s1", destinations=("fake:one",))
    return store


def _call(spec: ToolSpec, caller: Caller = AGENT, text: str = "x") -> Call:
    args = {"saga_id": "s1", "text": text}
    key = spec.key(Args(**args)) if spec.key else None
    return Call(
        spec=spec,
        proposal=ToolCall(tool=spec.name, arguments=args, call_id="c1"),
        caller=caller,
        args=args,
        model=Args(**args),
        digest="d" * 64,
        key=key,
        times=EventTimes(proposed_at=NOW),
        phases=Phases({}),
    )


# -- Validate ------------------------------------------------------------------
def _validate(next: Next, store: MemoryHarnessStore) -> Validate:
    return Validate(next, Registry([READ, WRITE]), DEFAULT_LIMITS, Answers(store, lambda: NOW))


def test_validate_passes_a_valid_call_on_with_its_key_and_digest() -> None:
    next, store = Next(), _store()
    out = _validate(next, store)(
        ToolCall(tool="t.write", arguments='{"text": "y"}', call_id="1"), AGENT, EventTimes(), Phases({})
    )
    assert out.output == "passed on"
    (call,) = next.calls
    assert call.key == "w-y" and len(call.digest) == 64 and call.model == Args(text="y")


def test_validate_refuses_unknown_tools_and_bad_arguments_as_schema() -> None:
    next, store = Next(), _store()
    validate = _validate(next, store)
    for proposal in (
        ToolCall(tool="nope", arguments={}, call_id="1"),
        ToolCall(tool="t.write", arguments="{not json", call_id="2"),
        ToolCall(tool="t.write", arguments={"text": 3, "extra": 1}, call_id="3"),
    ):
        out = validate(proposal, AGENT, EventTimes(), Phases({}))
        assert out.status is ToolStatus.REJECTED and out.refusal is Refusal.SCHEMA, out
        assert out.event_id is not None  # the refusal is recorded
    assert next.calls == []


# -- Authorize -----------------------------------------------------------------
def _authorize(next: Next, store: MemoryHarnessStore) -> Authorize:
    return Authorize(next, store, signing_key=KEY, clock=lambda: NOW, answers=Answers(store, lambda: NOW))


def test_authorize_checks_the_persons_role_before_anything_else() -> None:
    next, store = Next(), _store()
    author = Principal(id="u1", name="ann", display="ann", roles=frozenset({Role.AUTHOR}))
    caller = Caller(actor="ann", capabilities=AGENT.capabilities, saga_id="s1", principal=author)
    out = _authorize(next, store)(_call(PUBLISH, caller))
    assert out.refusal is Refusal.PERMISSION and next.calls == []


def test_authorize_refuses_a_missing_capability_as_policy() -> None:
    next, store = Next(), _store()
    caller = Caller(actor="agent", capabilities=frozenset({"t.read"}), saga_id="s1")
    out = _authorize(next, store)(_call(WRITE, caller))
    assert out.status is ToolStatus.REJECTED and out.refusal is Refusal.POLICY and next.calls == []


def test_authorize_makes_a_high_risk_call_wait_for_an_approval_then_passes_it_on() -> None:
    next, store = Next(), _store()
    authorize = _authorize(next, store)
    waiting = authorize(_call(PUBLISH))
    assert waiting.status is ToolStatus.APPROVAL_REQUIRED and waiting.refusal is Refusal.APPROVAL_MISSING
    binding = ApprovalBinding(
        saga_id="s1",
        version=1,
        version_digest=DIGEST,
        destinations=("fake:one",),
        session=session_for("s1", 1),
        approver="editor",
        expires_at=NOW + timedelta(hours=1),
    )
    approval = store.issue_approval(binding, KEY)
    assert authorize(_call(PUBLISH)).output == "passed on"
    (call,) = next.calls
    assert call.approval_id == approval.approval_id and call.request is not None


def test_authorize_says_stale_for_an_approval_of_another_version() -> None:
    next, store = Next(), _store()
    other = high_risk(
        "publish",
        "publish",
        Args,
        _run,
        key=lambda a: f"p-{a.text}",
        probe=IRREVERSIBLE,
        compensation=IRREVERSIBLE,
        approval=lambda a: (a.saga_id, "b" * 64, "fake:one"),
    )
    binding = ApprovalBinding(
        saga_id="s1",
        version=1,
        version_digest=DIGEST,
        destinations=("fake:one",),
        session=session_for("s1", 1),
        approver="editor",
        expires_at=NOW - timedelta(hours=1),
    )
    store.issue_approval(binding, KEY)
    expired = _authorize(next, store)(_call(PUBLISH))
    assert expired.status is ToolStatus.REJECTED and expired.refusal is Refusal.APPROVAL_STALE
    assert _authorize(next, store)(_call(other)).refusal is Refusal.APPROVAL_MISSING  # none for that digest
    assert next.calls == []


# -- Ledger --------------------------------------------------------------------
def _ledger(executor: FakeExecutor, store: MemoryHarnessStore, budget: int = 0) -> Ledger:
    return Ledger(executor, store, Answers(store, lambda: NOW), claim_seconds=30, saga_budget=budget)


def test_ledger_commits_the_intent_runs_once_and_replays_from_the_record() -> None:
    store = _store()
    executor = FakeExecutor(Attempt("applied", output={"ok": 1}))
    ledger = _ledger(executor, store)
    first = ledger(_call(WRITE))
    assert first.status is ToolStatus.OK and store.ledger_get("w-x").status == "done"  # type: ignore[union-attr]
    again = _call(WRITE)
    again.ledger = store.ledger_get("w-x")
    replay = ledger(again)
    assert replay.status is ToolStatus.REPLAYED and replay.output == {"ok": 1}
    assert executor.runs == 1


def test_ledger_asks_the_status_when_an_effect_may_exist() -> None:
    store = _store()
    executor = FakeExecutor(
        Attempt("maybe", reason="timed out"), ProbeAnswer(kind="unknown", detail="no idea")
    )
    out = _ledger(executor, store)(_call(WRITE))
    assert out.status is ToolStatus.UNCERTAIN and executor.probes == 1
    assert store.ledger_get("w-x").status == "uncertain"  # type: ignore[union-attr]


def test_ledger_answers_in_flight_while_another_call_holds_the_key() -> None:
    store = _store()
    executor = FakeExecutor(Attempt("applied", output={}))
    ledger = _ledger(executor, store)
    hold = _call(WRITE)
    store.begin_effect(
        saga_id="s1",
        actor="other",
        state=AgentState(
            event_id="e0", step=1, tool="t.write", idempotency_key="w-x", args_digest=hold.digest
        ),
        approval_id=None,
        execution=None,
        times=EventTimes(),
        claim_seconds=60,
    )
    out = ledger(_call(WRITE))
    assert out.refusal is Refusal.IN_FLIGHT and out.retry_after == 30 and out.output["in_flight"] is True
    assert executor.runs == 0


def test_ledger_charges_the_saga_budget_and_refuses_when_it_is_spent() -> None:
    store = _store()
    executor = FakeExecutor(Attempt("applied", output={"ok": 1}))
    ledger = _ledger(executor, store, budget=2)
    assert ledger(_call(WRITE, text="a")).status is ToolStatus.OK
    assert ledger(_call(READ)).status is ToolStatus.OK
    spent = ledger(_call(WRITE, text="b"))
    assert spent.refusal is Refusal.BUDGET_EXHAUSTED and "budget exhausted" in (spent.reason or "")
    assert executor.runs == 2 and store.spent("s1").calls == 2
    assert store.ledger_get("w-b") is None  # the intent rolled back with the charge
    # A person's command is not charged.
    person = Principal(id="u2", name="op", display="op", roles=frozenset({Role.OPERATOR}))
    caller = Caller(actor="op", capabilities=AGENT.capabilities, saga_id="s1", principal=person)
    assert ledger(_call(WRITE, caller, text="c")).status is ToolStatus.OK


# -- Trace and the executor ----------------------------------------------------
def test_trace_opens_the_send_phase_and_stamps_the_time() -> None:
    executor = FakeExecutor(Attempt("applied", output=1))
    call = _call(READ)
    assert Trace(executor, lambda: NOW).run(call).output == 1
    assert call.times.sent_at == NOW and executor.runs == 1


def test_the_spec_executor_says_what_happened_without_raising() -> None:
    def broken(ctx: ToolContext, a: Args) -> None:
        raise MaybeApplied("timed out")

    def buggy(ctx: ToolContext, a: Args) -> None:
        raise KeyError("bug")

    maybe = reversible_write("t.w", "w", Args, broken, key=lambda a: "k")
    assert SpecExecutor().run(_call(maybe)).outcome == "maybe"  # the destination cannot say
    bug = reversible_write("t.w", "w", Args, buggy, key=lambda a: "k")
    assert SpecExecutor().run(_call(bug)).outcome == "failed"  # a reversible write's bug: no effect to fear
    risky = high_risk(
        "t.p",
        "p",
        Args,
        broken,
        key=lambda a: "k",
        probe=IRREVERSIBLE,
        compensation=IRREVERSIBLE,
        approval=lambda a: ("s1", DIGEST, "fake:one"),
    )
    assert SpecExecutor().run(_call(risky)).outcome == "maybe"
    assert SpecExecutor().probe(_call(risky)).kind == "unknown"  # NO_PROBE-like: no status query


# -- the path entry points get -------------------------------------------------
def test_the_tool_path_lists_descriptions_without_executors() -> None:
    import ast
    import dataclasses
    from pathlib import Path

    from orchestrator.harness.spec import ToolInfo
    from orchestrator.toolpath.engine import Harness

    harness = Harness(Registry([READ, WRITE, PUBLISH]), _store(), signing_key=KEY)
    assert [t.name for t in harness.tools] == ["publish", "t.read", "t.write"]
    fields = {f.name for f in dataclasses.fields(ToolInfo)}
    assert not fields & {"executor", "status_probe", "recorder", "pre_execute", "key"}
    root = Path(__file__).resolve().parents[2] / "orchestrator" / "entrypoints"
    for module in ("mcp_server.py", "mcp_listing.py"):
        tree = ast.parse((root / module).read_text(encoding="utf-8"))
        touched = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert "registry" not in touched, f"{module} reaches the registry"


def test_a_compensation_must_name_a_registered_write_tool() -> None:
    import pytest

    from orchestrator.harness.registry import RegistryError
    from orchestrator.toolpath.engine import Harness

    undo = high_risk(
        "publish",
        "p",
        Args,
        _run,
        key=lambda a: "k",
        probe=IRREVERSIBLE,
        compensation="t.undo",
        approval=lambda a: ("s1", DIGEST, "fake:one"),
    )
    with pytest.raises(RegistryError, match="t.undo"):
        Harness(Registry([undo]), _store(), signing_key=KEY)
    fixed = reversible_write("t.undo", "undo", Args, _run, key=lambda a: "u")
    harness = Harness(Registry([undo, fixed]), _store(), signing_key=KEY)
    assert next(t for t in harness.tools if t.name == "publish").compensation == "t.undo"

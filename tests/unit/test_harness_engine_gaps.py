"""Engine behaviours found while writing the fault suite, fixed since: kept as regression tests."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from evaluation.memory_store import MemoryHarnessStore
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import Risk, ToolCall, ToolContext, ToolSpec, ToolStatus
from orchestrator.toolpath.engine import Caller, Harness


class NoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    round: int = 0


def _harness(executor: Any, risk: Risk) -> Harness:
    spec = ToolSpec(
        name="t",
        description="t",
        input_model=NoteArgs,
        risk=risk,
        executor=executor,
        key=(lambda a: f"t-{a.text}-{a.round}") if risk is not Risk.READ_ONLY else None,
    )
    return Harness(Registry([spec]), MemoryHarnessStore(), signing_key=b"k")


CALLER = Caller(actor="tester", capabilities=frozenset({"t"}))


def test_the_same_validated_arguments_replay_instead_of_conflicting() -> None:
    calls: list[NoteArgs] = []
    harness = _harness(lambda ctx, a: calls.append(a) or {"saved": True}, Risk.REVERSIBLE_WRITE)
    assert (
        harness.call(ToolCall(tool="t", arguments={"text": "a"}, call_id="1"), CALLER).status is ToolStatus.OK
    )
    again = harness.call(ToolCall(tool="t", arguments={"text": "a", "round": 0}, call_id="2"), CALLER)
    assert again.status is ToolStatus.REPLAYED, again.reason
    assert len(calls) == 1


def test_a_failing_read_only_executor_answers_error() -> None:
    def broken(ctx: ToolContext, args: NoteArgs) -> dict[str, Any]:
        raise OSError("disk gone")

    result = _harness(broken, Risk.READ_ONLY).call(
        ToolCall(tool="t", arguments={"text": "a"}, call_id="1"), CALLER
    )
    assert result.status is ToolStatus.ERROR and result.reason and "disk gone" in result.reason

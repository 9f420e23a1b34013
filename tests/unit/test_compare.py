"""The framework comparison on the in-repository graph: every column equal, and it can fail."""

from __future__ import annotations

from typing import Any

import pytest

from evaluation import state_graph as sg
from evaluation.compare import run_compare, run_comparison
from tests.support.broken_graph import broken_wiring

COLUMNS = {
    "schema-validation-failure",
    "state-before-approval",
    "idempotency-replay",
    "checkpoint-after-interruption",
}


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["scenario"]: r for r in report["scenarios"]}


def test_every_column_is_equal_on_the_local_graph() -> None:
    report = run_comparison("local")
    rows = _rows(report)
    assert set(rows) == COLUMNS
    assert report["status"] == "measured" and report["all_equal"] is True
    assert report["harness_fixture"]["passed"] == report["harness_fixture"]["scenarios"] > 10
    for row in rows.values():
        assert row["equal"] is True and row["framework"] == row["handwritten"], row
        assert row["steps"] > 0 and row["failure"] is None
        assert row["graph_counts"] == {"nodes": 5, "edges": 4, "conditional_edges": 5}
    schema = rows["schema-validation-failure"]["handwritten"]
    assert schema["side_effects"] == 0 and schema["executor_calls"] == 0
    assert set(schema["statuses"]) == {"rejected"}
    before = rows["state-before-approval"]
    assert before["handwritten"]["high_risk"] == "approval_required"
    assert before["handwritten"]["high_risk_executor_calls_before_approval"] == 0
    assert before["detail"] == {"paused_at": "await_approval", "interrupted": True}
    replay = rows["idempotency-replay"]["handwritten"]
    assert replay["high_risk"] == ["ok", "replayed", "replayed"] and replay["effects"] == 1
    interrupted = rows["checkpoint-after-interruption"]
    assert interrupted["handwritten"]["after_interruption"]["ledger"] == "pending"
    assert interrupted["handwritten"]["after_restart"] == {
        "status": "ok",
        "ledger": "done",
        "executor_calls": 1,
        "effects": 1,
    }
    assert interrupted["detail"] == {"resumes_at": "execute"}
    assert report["graph"]["nodes"] == ["authorize", "await_approval", "execute", "propose", "validate"]
    assert "authorize -> await_approval" in report["graph"]["conditional_edges"]


def test_a_graph_that_executes_before_validating_makes_the_schema_column_unequal() -> None:
    report = run_comparison("local", wiring=broken_wiring)
    schema = _rows(report)["schema-validation-failure"]
    assert schema["equal"] is False
    assert schema["handwritten"]["side_effects"] == 0
    assert schema["framework"]["executor_calls"] > 0 and schema["framework"]["side_effects"] > 0
    assert report["all_equal"] is False
    assert run_compare("local", as_json=True, output=None, wiring=broken_wiring) == 1


def test_an_unknown_framework_is_bad_input() -> None:
    from orchestrator.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="unknown framework"):
        run_comparison("crewai")


# -- the local graph's own semantics ---------------------------------------------------------------
def _counter_graph(fail_once: list[bool]) -> sg.StateGraph:
    def add(state: dict[str, Any]) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    def ask(state: dict[str, Any]) -> dict[str, Any]:
        return {"answer": sg.interrupt({"question": state["n"]})}

    def risky(state: dict[str, Any]) -> dict[str, Any]:
        if fail_once and fail_once.pop():
            raise RuntimeError("killed mid-step")
        return {"n": state["n"] + 10}

    g = sg.StateGraph()
    g.add_node("add", add)
    g.add_node("ask", ask)
    g.add_node("risky", risky)
    g.add_edge(sg.START, "add")
    g.add_conditional_edges("add", lambda s: "ask" if s["n"] == 1 else sg.END, ["ask", sg.END])
    g.add_edge("ask", "risky")
    g.add_edge("risky", sg.END)
    return g


def test_interrupt_pauses_and_resume_returns_the_answer() -> None:
    graph = _counter_graph([]).compile(sg.MemoryCheckpointer())
    paused = graph.invoke({}, "t")
    assert paused["__interrupt__"] == {"question": 1}
    saved = graph.get_state("t")
    assert saved is not None and saved.next == "ask"
    done = graph.invoke(sg.Resume("yes"), "t")
    assert done["answer"] == "yes" and done["n"] == 11


def test_a_step_that_raised_runs_again_from_the_last_checkpoint() -> None:
    saver = sg.MemoryCheckpointer()
    graph = _counter_graph([True]).compile(saver)
    graph.invoke({}, "t")
    with pytest.raises(RuntimeError):
        graph.invoke(sg.Resume("yes"), "t")
    saved = graph.get_state("t")
    assert saved is not None and saved.next == "risky" and saved.values["answer"] == "yes"
    restarted = _counter_graph([]).compile(saver)
    assert restarted.invoke(None, "t")["n"] == 11


def test_a_router_naming_an_undeclared_target_and_unknown_nodes_are_refused() -> None:
    g = sg.StateGraph()
    g.add_node("a", lambda s: {})
    g.add_edge(sg.START, "a")
    g.add_conditional_edges("a", lambda s: "nowhere", ["a", sg.END])
    with pytest.raises(sg.GraphError, match="nowhere"):
        g.compile(sg.MemoryCheckpointer()).invoke({}, "t")
    g.add_edge("a", "ghost")
    with pytest.raises(sg.GraphError, match="ghost"):
        g.compile(sg.MemoryCheckpointer())


def test_a_loop_stops_at_the_step_limit() -> None:
    g = sg.StateGraph()
    g.add_node("a", lambda s: {})
    g.add_edge(sg.START, "a")
    g.add_edge("a", "a")
    with pytest.raises(sg.GraphError, match="no end after 5 steps"):
        g.compile(sg.MemoryCheckpointer(), max_steps=5).invoke({}, "t")

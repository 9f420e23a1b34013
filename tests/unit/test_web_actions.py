"""The pure rules behind the operators' buttons, the trace link and the findings' ticks."""

from __future__ import annotations

import pytest

from orchestrator.entrypoints.web.actions import operator_actions, trace_href, trace_id_of
from orchestrator.findings import acknowledged, finding_id, unacknowledged
from sagas.machine import TRANSITIONS, SagaEvent, SagaState

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(
    ("state", "steps", "expected"),
    [
        ("preparing", [], {"cancel"}),
        ("ready-for-review", ["pending"], {"cancel", "fork"}),
        ("approved", ["pending"], {"cancel", "fork"}),
        ("executing", ["done", "pending"], {"cancel", "fork"}),
        ("effect-unknown", ["done", "uncertain"], {"cancel", "reconcile", "fork"}),
        ("effect-unknown", ["compensation-failed"], {"cancel", "reconcile", "retry", "fork"}),
        ("failed", ["failed"], {"retry", "fork"}),
        ("succeeded", ["done"], {"fork"}),
        ("cancelled", ["compensated"], {"fork"}),
        ("no-such-state", ["uncertain"], {"fork"}),
    ],
)
def test_the_buttons_follow_the_state(state: str, steps: list[str], expected: set[str]) -> None:
    head = 0 if state == "preparing" else 1
    assert operator_actions(state, steps, head) == expected


def test_cancel_is_offered_exactly_where_the_machine_allows_it() -> None:
    for state in SagaState:
        offered = "cancel" in operator_actions(state.value, [], 1)
        assert offered == ((state, SagaEvent.CANCELLED) in TRANSITIONS), state


def test_reconcile_needs_an_unsettled_step() -> None:
    assert "reconcile" not in operator_actions("effect-unknown", ["done"], 1)


def test_the_trace_id_comes_from_the_stored_traceparent() -> None:
    assert trace_id_of({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}) == TRACE
    assert trace_id_of({"traceparent": f"00-{'0' * 32}-00f067aa0ba902b7-01"}) is None  # invalid id
    assert trace_id_of({"traceparent": "00-xyz-00f067aa0ba902b7-01"}) is None
    assert trace_id_of({}) is None and trace_id_of(None) is None


def test_the_trace_link_fills_the_template() -> None:
    template = "http://jaeger:16686/trace/{trace_id}"
    assert trace_href(template, TRACE) == f"http://jaeger:16686/trace/{TRACE}"
    assert trace_href(None, TRACE) is None and trace_href(template, None) is None


def test_settings_refuse_a_trace_url_that_is_no_http_link() -> None:
    from pydantic import ValidationError

    from orchestrator.core.config import Settings

    assert Settings(trace_url="https://t.example/trace/{trace_id}").trace_url
    for bad in ("javascript:alert(1)//{trace_id}", "http://t.example/trace", "http://t/{trace_id} x"):
        with pytest.raises(ValidationError):
            Settings(trace_url=bad)


FINDINGS = [
    {"rule": "uncited-paragraph", "location": "paragraph 9", "message": "the paragraph cites no source"},
    {"rule": "dangling-marker", "location": "paragraph 2", "message": "marker [7] has no citation"},
]


def test_a_finding_is_acknowledged_only_by_its_own_id() -> None:
    ids = [finding_id(f) for f in FINDINGS]
    assert len(set(ids)) == 2 and ids == [finding_id(dict(f)) for f in FINDINGS]  # stable
    assert unacknowledged(FINDINGS, ids) == []
    assert unacknowledged(FINDINGS, ids[:1]) == [FINDINGS[1]]
    assert unacknowledged(FINDINGS, ["0" * 16]) == FINDINGS
    changed = {**FINDINGS[0], "message": "another text"}
    assert finding_id(changed) != ids[0]
    assert acknowledged(FINDINGS) == [
        {"id": ids[0], "rule": "uncited-paragraph", "location": "paragraph 9"},
        {"id": ids[1], "rule": "dangling-marker", "location": "paragraph 2"},
    ]


def test_the_mcp_answer_for_an_uncertain_call_names_a_complete_command() -> None:
    from orchestrator.entrypoints.mcp_server import explain
    from orchestrator.harness.spec import ToolResult, ToolStatus

    text = explain(ToolResult(tool="publish", status=ToolStatus.UNCERTAIN, reason="no answer"), None)
    assert "pressroom reconcile SAGA_ID --dest URI --outcome confirmed|absent --as NAME --reason TEXT" in text

"""`policy.decide` as a table, and the approval token (`mint`, `refusal`). Pure: no store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.harness.approvals import (
    ApprovalBinding,
    ApprovalRequest,
    ApprovalView,
    mint,
    refusal,
    session_for,
)
from orchestrator.harness.policy import Action, AwaitApproval, Executable, PolicyState, Reject, decide
from orchestrator.harness.spec import Risk

KEY = b"policy-test-key"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
DIGEST = "a" * 64
SESSION = session_for("saga-1", 1)


def binding(**changes: Any) -> ApprovalBinding:
    base: dict[str, Any] = {
        "saga_id": "saga-1",
        "version": 1,
        "version_digest": DIGEST,
        "destinations": ("site:out", "git:repo"),
        "session": SESSION,
        "approver": "editor",
        "expires_at": NOW + timedelta(hours=1),
    }
    return ApprovalBinding(**{**base, **changes})


def view(b: ApprovalBinding | None = None, *, token: str | None = None, **changes: Any) -> ApprovalView:
    b = b or binding()
    return ApprovalView(approval_id="ap-1", binding=b, token=token or mint(b, KEY), **changes)


WANT = ApprovalRequest(
    saga_id="saga-1", version_digest=DIGEST, destination="site:out", session=SESSION, execution=SESSION
)


def action(risk: Risk = Risk.HIGH_RISK, tool: str = "publish") -> Action:
    return Action(tool=tool, risk=risk, arguments={"x": 1}, args_digest="d" * 64, idempotency_key="k")


def state(approval: ApprovalView | None, **changes: Any) -> PolicyState:
    base: dict[str, Any] = {
        "capabilities": frozenset({"publish", "fetch"}),
        "needed_capability": "publish",
        "approval_request": WANT,
        "approval": approval,
        "now": NOW,
    }
    return PolicyState(**{**base, **changes})


REJECTED = [
    ("expired", view(binding(expires_at=NOW - timedelta(seconds=1))), "approval expired"),
    ("expires-now", view(binding(expires_at=NOW)), "approval expired"),
    ("other saga", view(binding(saga_id="saga-2")), "another saga"),
    ("other destination", view(binding(destinations=("git:repo",))), "does not cover destination site:out"),
    ("other session", view(binding(session=session_for("saga-1", 2))), "another run"),
    ("used by another execution", view(consumed_by=session_for("saga-1", 0)), "another execution"),
    ("forged token", view(token="0" * 64), "does not verify"),
    ("edited row", view(binding(), token=mint(binding(approver="someone"), KEY)), "does not verify"),
    ("minted with another key", view(token=mint(binding(), b"other key")), "does not verify"),
    ("voided", view(voided=True), "voided"),
]


@pytest.mark.parametrize(("case", "approval", "why"), REJECTED, ids=[r[0] for r in REJECTED])
def test_a_misused_approval_is_rejected_with_its_reason(case: str, approval: ApprovalView, why: str) -> None:
    decision = decide(state(approval), action(), key=KEY)
    assert isinstance(decision, Reject), decision
    assert why in decision.reason


def test_a_denied_tool_is_rejected_whatever_the_caller_holds() -> None:
    decision = decide(state(view(), needed_capability="shell.run"), action(Risk.DENY, "shell.run"), key=KEY)
    assert decision == Reject(reason="tool shell.run is denied by policy")


@pytest.mark.parametrize("risk", list(Risk))
def test_a_missing_capability_is_rejected_for_every_risk_class(risk: Risk) -> None:
    decision = decide(state(view(), capabilities=frozenset({"fetch"})), action(risk), key=KEY)
    assert isinstance(decision, Reject)


def test_no_approval_means_await_approval_with_the_request() -> None:
    decision = decide(state(None), action(), key=KEY)
    assert isinstance(decision, AwaitApproval)
    assert decision.request == WANT and decision.reason == "no approval for this version"


def test_an_approval_for_another_version_awaits_an_approval_of_this_one() -> None:
    # Mapped on purpose to AwaitApproval, not Reject (policy.decide): a person must approve this
    # version. Either way nothing executes.
    decision = decide(state(view(binding(version_digest="b" * 64))), action(), key=KEY)
    assert isinstance(decision, AwaitApproval)
    assert decision.reason == "approval is for another version"


def test_a_valid_approval_makes_the_action_executable_with_its_id() -> None:
    decision = decide(state(view()), action(), key=KEY)
    assert decision == Executable(action=action(), approval_id="ap-1")


def test_the_execution_that_consumed_an_approval_may_go_on_after_expiry() -> None:
    used = view(binding(expires_at=NOW - timedelta(hours=2)), consumed_by=SESSION)
    assert isinstance(decide(state(used), action(), key=KEY), Executable)


def test_a_high_risk_tool_without_an_approval_binding_is_rejected() -> None:
    decision = decide(state(None, approval_request=None), action(), key=KEY)
    assert isinstance(decision, Reject) and "no approval binding" in decision.reason


def test_a_completed_key_is_answered_from_the_record_without_an_approval() -> None:
    assert isinstance(decide(state(None, replay=True), action(), key=KEY), Executable)


@pytest.mark.parametrize("risk", [Risk.READ_ONLY, Risk.REVERSIBLE_WRITE])
def test_lower_risk_tools_need_only_the_capability(risk: Risk) -> None:
    decision = decide(state(None, approval_request=None), action(risk), key=KEY)
    assert decision == Executable(action=action(risk))


def test_decisions_are_tagged_values_that_round_trip() -> None:
    from pydantic import TypeAdapter

    from orchestrator.harness.policy import Decision

    adapter: TypeAdapter[Reject | AwaitApproval | Executable] = TypeAdapter(Decision)
    for decision in (decide(state(None), action(), key=KEY), decide(state(view()), action(), key=KEY)):
        assert adapter.validate_json(adapter.dump_json(decision)) == decision


# -- the token -------------------------------------------------------------------------------
def test_mint_is_deterministic_keyed_and_ignores_destination_order() -> None:
    b = binding()
    assert mint(b, KEY) == mint(b, KEY)
    assert mint(b, KEY) != mint(b, b"another key")
    assert mint(b, KEY) == mint(binding(destinations=("git:repo", "site:out")), KEY)


@pytest.mark.parametrize(
    "change",
    [
        {"saga_id": "x"},
        {"version": 2},
        {"version_digest": "c" * 64},
        {"destinations": ("site:out",)},
        {"session": "x:1"},
        {"approver": "mallory"},
        {"expires_at": NOW + timedelta(days=30)},
    ],
)
def test_every_bound_field_changes_the_token(change: dict[str, Any]) -> None:
    assert mint(binding(**change), KEY) != mint(binding(), KEY)


def test_refusal_is_none_only_for_a_valid_approval() -> None:
    assert refusal(view(), WANT, key=KEY, now=NOW) is None
    assert refusal(None, WANT, key=KEY, now=NOW) == "no approval for this version"
    assert refusal(view(), WANT.model_copy(update={"destination": "git:repo"}), key=KEY, now=NOW) is None
    assert refusal(view(), WANT.model_copy(update={"destination": "webhook:x"}), key=KEY, now=NOW)

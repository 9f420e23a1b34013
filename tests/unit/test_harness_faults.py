"""One test per row of the fault-injection table, on the in-memory store.

Each scenario (`evaluation.fault_scenarios`) runs the fault through
a side door (the executor called directly) and through the harness. The
tests assert both: the failure the defence exists for, then that it is
prevented. The saga-level half of the timeout row (`effect-unknown`, then
`reconcile`) runs on SQL in `tests/integration/test_harness_sql.py`.
"""

from __future__ import annotations

import pytest

from evaluation import fault_scenarios as fs
from evaluation.faults import INJECTED
from evaluation.memory_store import MemoryHarnessStore


@pytest.fixture
def store() -> MemoryHarnessStore:
    return MemoryHarnessStore()


def _failed(out: fs.Outcome) -> dict[str, bool]:
    return {name: ok for name, ok in out.checks.items() if not ok}


# -- side effect happened, then timeout ------------------------------------------------------
def test_timeout_after_the_effect_is_uncertain_and_never_called_again(store: MemoryHarnessStore) -> None:
    out = fs.timeout_after_effect(store)
    # Without the harness: a retry on timeout applies the effect a second time.
    assert out.naive["effects"] == 2 and out.naive["duplicates"] == 1
    # With it: uncertain, a redelivery is answered from the ledger, reconcile confirmed replays.
    assert out.statuses == ["uncertain", "uncertain", "replayed"]
    assert out.calls == 1 and out.effects == 1 and out.duplicates == 0
    assert out.passed, _failed(out)
    assert out.recoverable is False  # only a person moves it on


def test_timeout_after_the_effect_with_a_status_query_is_settled_without_a_person(
    store: MemoryHarnessStore,
) -> None:
    out = fs.timeout_after_effect_status_applied(store)
    assert out.naive["duplicates"] == 1
    assert out.statuses == ["ok", "replayed"] and out.calls == 1 and out.effects == 1
    assert out.passed and out.recovered, _failed(out)


def test_timeout_before_the_effect_is_a_definite_error_and_runs_once_on_retry(
    store: MemoryHarnessStore,
) -> None:
    out = fs.timeout_before_effect_status_absent(store)
    assert out.statuses == ["error", "ok"] and out.effects == 1 and out.duplicates == 0
    assert out.passed and out.recovered, _failed(out)


def test_redeliveries_after_success_are_answered_from_the_record(store: MemoryHarnessStore) -> None:
    out = fs.redelivery_after_success(store)
    assert out.naive["effects"] == 3 and out.naive["duplicates"] == 2
    assert out.statuses == ["ok", "replayed", "replayed"] and out.calls == 1
    assert out.passed, _failed(out)


# -- high-risk call before approval -----------------------------------------------------------
def test_a_high_risk_call_before_approval_is_not_executed(store: MemoryHarnessStore) -> None:
    out = fs.high_risk_before_approval(store)
    assert out.naive["calls"] == 1 and out.naive["unapproved"] == 1
    assert out.statuses == ["approval_required"]
    assert out.calls == 0 and out.unapproved == 0
    assert out.passed, _failed(out)


# -- MCP or task path handed a bare executor -----------------------------------------------------
def test_every_entry_path_gets_the_local_policy_decision(store: MemoryHarnessStore) -> None:
    out = fs.entry_paths(store)
    assert out.naive["unapproved"] == 1  # a path holding the executor publishes unapproved
    before = out.facts["before_approval"]
    assert before["publish#0"] == ["approval_required"] * 3
    assert before["publish#1"] == ["rejected"] * 3
    assert before["shell.run#2"] == ["rejected"] * 3
    assert before["fetch#3"] == ["ok"] * 3
    assert out.facts["after_approval"] == ["ok", "replayed", "replayed"]
    assert out.calls == 1 and out.unapproved == 0
    assert out.passed, _failed(out)


# -- invalid arguments ---------------------------------------------------------------------------
def test_invalid_arguments_are_rejected_before_the_executor_and_the_reason_reaches_the_planner(
    store: MemoryHarnessStore,
) -> None:
    out = fs.invalid_arguments(store)
    assert out.naive["calls"] == 4  # the side door runs the executor on every one of them
    assert out.statuses == ["rejected"] * 5 and out.calls == 0
    reasons = out.facts["planner_saw"]
    assert "not valid JSON" in reasons[0]
    assert "version_digest" in reasons[1] and "approved" in reasons[2]
    assert "version_digest: Field required" in reasons[3] and "destination" in reasons[4]
    assert out.passed, _failed(out)


# -- approval replayed, other args, other session, expired -----------------------------------------
def test_misused_approvals_are_refused_with_no_executor_call(store: MemoryHarnessStore) -> None:
    out = fs.approval_misuse(store)
    assert out.naive["unapproved"] == len(fs.MISUSES)  # the side door publishes every one
    assert out.calls == 0 and out.unapproved == 0
    expect = {
        "replayed": ("rejected", "another execution"),
        "other-args": ("approval_required", "no approval for this version"),
        "other-session": ("rejected", "another run"),
        "expired": ("rejected", "expired"),
        "other-destination": ("rejected", "does not cover destination"),
        "forged-token": ("rejected", "does not verify"),
        "voided": ("rejected", "voided"),
    }
    for name, (status, why) in expect.items():
        assert out.facts[name]["status"] == status, name
        assert why in out.facts[name]["reason"], name
    assert out.passed, _failed(out)


# -- crash after the checkpoint, before or after the effect -------------------------------------------
@pytest.mark.parametrize(
    ("when", "probe", "status", "calls", "effects"),
    [
        ("before", True, "ok", 2, 1),  # the probe says absent: runs once
        ("after", True, "ok", 1, 1),  # the probe says applied: recorded ok, no second call
        ("before", False, "uncertain", 1, 0),  # no probe: a person decides
        ("after", False, "uncertain", 1, 1),
    ],
)
def test_a_restart_finds_the_intent_and_never_duplicates_the_effect(
    store: MemoryHarnessStore, when: str, probe: bool, status: str, calls: int, effects: int
) -> None:
    out = fs.crash_restart(store, when, probe)
    if when == "after":
        assert out.naive["duplicates"] == 1  # a restart that re-runs the step publishes twice
    assert out.checks["crashed"] and out.checks["intent_found"]  # the ledger row was pending
    assert out.statuses == [status] and out.calls == calls and out.effects == effects
    assert out.duplicates == 0
    assert out.passed, _failed(out)
    assert out.recoverable is probe


# -- tool output containing instructions ---------------------------------------------------------------
def test_instructions_in_tool_output_stay_data(store: MemoryHarnessStore) -> None:
    out = fs.instructions_in_output(store)
    assert out.naive["unapproved"] == 1  # an agent obeying the text with the executor in hand
    # A planner that only reads: one call, the envelope is untrusted data holding the text verbatim.
    assert out.checks["envelope_is_untrusted_data"] and out.checks["text_kept_as_data"]
    assert out.checks["no_call_from_text"]
    # A planner that obeys: self-approval is denied, the publish waits for a person.
    assert out.facts["obedient_statuses"] == ["ok", "rejected", "approval_required"]
    assert out.calls == 0 and out.checks["no_approval_created"]
    assert "publish" in INJECTED and "approval.grant" in INJECTED
    assert out.passed, _failed(out)


# -- beyond the table: a second caller while the first call is in flight ------------------------------
IN_FLIGHT_BUG = (
    "BUG engine.py Harness._settle_known_key + store/harness_store.py _ledger_pending (re-pends a `pending` "
    "row): a "
    "second caller with the same key while the first is in flight sees `pending`, the probe says absent "
    "(nothing applied yet), and the executor runs a second time"
)


def test_a_second_caller_while_the_first_is_in_flight_does_not_call_again(store: MemoryHarnessStore) -> None:
    out = fs.redelivery_while_in_flight(store)
    assert out.naive["duplicates"] == 1
    assert out.checks["first_ok"]
    assert out.calls == 1 and out.duplicates == 0, (out.facts, out.statuses)


def test_every_table_scenario_passes_on_one_shared_store(store: MemoryHarnessStore) -> None:
    outcomes = [o for o in fs.run_scenarios(store) if o.row != fs.ROW_IN_FLIGHT]
    assert len(outcomes) == len(fs.SCENARIOS) - 1
    assert [o.name for o in outcomes if not o.passed] == []
    assert sum(o.unapproved for o in outcomes) == 0
    assert sum(o.duplicates for o in outcomes) == 0
    assert sum(o.naive.get("unapproved", 0) for o in outcomes) > 0
    assert sum(o.naive.get("duplicates", 0) for o in outcomes) > 0

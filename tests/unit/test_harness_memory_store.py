"""The in-memory harness store keeps the SQL store's semantics (the integration suite compares them)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from evaluation.memory_store import MemoryHarnessStore, MemoryTx
from orchestrator.core.errors import ApprovalRefused, IdempotencyConflict, KeyInFlight
from orchestrator.harness.approvals import ApprovalBinding, session_for
from orchestrator.harness.checkpoints import AgentState, verify_chain
from orchestrator.harness.ports import EventTimes, HarnessStore

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = b"store-test-key"


def _store() -> MemoryHarnessStore:
    store = MemoryHarnessStore(clock=lambda: NOW)
    store.add_saga("s1", destinations=("fake:one",))
    return store


def _binding(**changes: Any) -> ApprovalBinding:
    base: dict[str, Any] = {
        "saga_id": "s1",
        "version": 1,
        "version_digest": "a" * 64,
        "destinations": ("fake:one",),
        "session": session_for("s1", 1),
        "approver": "editor",
        "expires_at": NOW + timedelta(hours=1),
    }
    return ApprovalBinding(**{**base, **changes})


def _state(key: str | None = "k1", digest: str = "d" * 64, step: int = 1) -> AgentState:
    return AgentState(
        event_id=f"ev-{step}-{key}", step=step, tool="publish", idempotency_key=key, args_digest=digest
    )


def _begin(
    store: MemoryHarnessStore,
    state: AgentState,
    approval_id: str | None = None,
    execution: str = "s1:1",
    claim_seconds: float = 0.0,
) -> str:
    return store.begin_effect(
        saga_id="s1",
        actor="publisher",
        state=state,
        approval_id=approval_id,
        execution=execution,
        times=EventTimes(proposed_at=NOW, authorized_at=NOW),
        claim_seconds=claim_seconds,
    )


def _finish(store: MemoryHarnessStore, status: str, hook: Any = None, key: str = "k1") -> str:
    return store.finish_effect(
        key=key,
        ledger_status=status,
        result={"receipt": 1} if status == "done" else None,
        event={"saga_id": "s1", "actor": "publisher", "kind": "tool_call", "status": "ok", "tool": "publish"},
        hook=hook,
    )


def test_it_is_a_harness_store() -> None:
    store: HarnessStore = _store()
    assert store.saga_session("s1") == "s1:1"
    assert store.saga_session("nope") is None


def test_an_approval_is_consumed_once_by_one_execution() -> None:
    store = _store()
    approval = store.issue_approval(_binding(), KEY)
    _begin(store, _state("k1"), approval.approval_id, execution="s1:1")
    _begin(store, _state("k2", step=2), approval.approval_id, execution="s1:1")  # same run goes on
    with pytest.raises(ApprovalRefused, match="another execution"):
        _begin(store, _state("k3", step=3), approval.approval_id, execution="s1:2")
    found = store.find_approval("s1", "a" * 64)
    assert found is not None and found.consumed_by == "s1:1"


@pytest.mark.parametrize(
    ("arrange", "why"),
    [
        (lambda s: s.add_approval(_binding(expires_at=NOW), "t"), "expired"),
        (lambda s: s.add_approval(_binding(), "t", voided=True), "voided"),
        (lambda s: "no-such-approval", "not found"),
    ],
)
def test_consumption_refuses_expired_voided_and_unknown_approvals(arrange: Any, why: str) -> None:
    store = _store()
    approval_id = arrange(store)
    with pytest.raises(ApprovalRefused, match=why):
        _begin(store, _state(), approval_id)
    assert store.ledger_get("k1") is None, "nothing of the refused transaction remains"
    assert store.events() == [] and store.checkpoints("s1") == []


def test_a_refused_begin_leaves_the_approval_unconsumed() -> None:
    store = _store()
    _begin(store, _state("k1"))
    _finish(store, "done")
    approval = store.issue_approval(_binding(), KEY)
    with pytest.raises(IdempotencyConflict, match="is done"):
        _begin(store, _state("k1", step=2), approval.approval_id)
    view = store.find_approval("s1", "a" * 64)
    assert view is not None and view.consumed_by is None


def test_the_ledger_moves_through_its_statuses() -> None:
    store = _store()
    _begin(store, _state())
    row = store.ledger_get("k1")
    assert row is not None and (row.status, row.attempts, row.tool, row.saga_id) == (
        "pending",
        1,
        "publish",
        "s1",
    )
    for status in ("failed", "absent", "pending"):
        store.finish_effect(key="k1", ledger_status=status, result=None, event=_event())
        _begin(store, _state(step=2))
    row = store.ledger_get("k1")
    assert row is not None and row.status == "pending" and row.attempts == 4
    _finish(store, "uncertain")
    with pytest.raises(IdempotencyConflict, match="is uncertain"):
        _begin(store, _state(step=3))


def test_a_live_claim_on_a_pending_key_is_refused_as_in_flight() -> None:
    store = _store()
    _begin(store, _state(), claim_seconds=60)
    with pytest.raises(IdempotencyConflict, match="in flight") as info:
        _begin(store, _state(step=2))
    assert isinstance(info.value, KeyInFlight)
    row = store.ledger_get("k1")
    assert row is not None and row.attempts == 1 and row.claimed_until is not None


def _event() -> dict[str, Any]:
    return {"saga_id": "s1", "actor": "publisher", "kind": "tool_call", "status": "error", "tool": "publish"}


def test_the_same_key_with_other_arguments_is_a_conflict() -> None:
    store = _store()
    _begin(store, _state(digest="d" * 64))
    with pytest.raises(IdempotencyConflict, match="other arguments"):
        _begin(store, _state(digest="e" * 64, step=2))


def test_finish_runs_the_recorder_only_for_done_inside_the_transaction() -> None:
    store = _store()
    seen: list[MemoryTx] = []
    _begin(store, _state())
    _finish(store, "uncertain", hook=seen.append)
    assert seen == []
    store.reconcile("k1", "absent")
    _begin(store, _state(step=2))
    event_id = _finish(store, "done", hook=seen.append)
    assert [(tx.event_id, tx.saga_id, tx.store) for tx in seen] == [(event_id, "s1", store)]
    row = store.ledger_get("k1")
    assert row is not None and row.status == "done" and row.result == {"receipt": 1}


def test_a_failing_hook_rolls_back_the_whole_transaction() -> None:
    store = _store()
    _begin(store, _state())
    before = len(store.events())

    def boom(_tx: Any) -> None:
        raise RuntimeError("recorder failed")

    with pytest.raises(RuntimeError):
        _finish(store, "done", hook=boom)
    row = store.ledger_get("k1")
    assert row is not None and row.status == "pending"
    assert len(store.events()) == before
    with pytest.raises(RuntimeError):
        store.record_event(saga_id="s1", actor="a", kind="k", status="s", hook=boom)
    assert len(store.events()) == before


def test_events_keep_the_four_times_as_they_were_at_commit() -> None:
    store = _store()
    times = EventTimes(proposed_at=NOW, authorized_at=NOW + timedelta(seconds=1))
    store.begin_effect(saga_id="s1", actor="p", state=_state(), approval_id=None, execution=None, times=times)
    times.sent_at = NOW + timedelta(seconds=2)  # the engine goes on filling its own copy
    times.acked_at = NOW + timedelta(seconds=3)
    store.finish_effect(key="k1", ledger_status="done", result={}, event={**_event(), "times": times})
    intent, result = store.events(saga_id="s1")
    assert intent.kind == "intent" and intent.status == "pending" and intent.times.sent_at is None
    assert intent.detail == {"key": "k1", "args_digest": "d" * 64, "approval_id": None}
    assert result.times == times and result.times is not times


def test_checkpoints_chain_per_saga() -> None:
    store = _store()
    store.add_saga("s2")
    for step in range(1, 4):
        _begin(store, _state(f"k{step}", step=step))
        store.begin_effect(
            saga_id="s2",
            actor="p",
            state=_state(f"x{step}", step=step),
            approval_id=None,
            execution=None,
            times=EventTimes(),
        )
    assert [c.step for c in store.checkpoints("s1")] == [1, 2, 3]
    assert verify_chain(store.checkpoint_chain("s1")) is None
    assert verify_chain(store.checkpoint_chain("s2")) is None


def test_the_latest_approval_for_a_version_is_found() -> None:
    store = _store()
    first = store.issue_approval(_binding(), KEY)
    second = store.issue_approval(_binding(approver="other"), KEY)
    found = store.find_approval("s1", "a" * 64)
    assert found is not None and found.approval_id == second.approval_id != first.approval_id
    assert store.find_approval("s1", "b" * 64) is None
    assert [a.approval_id for a in store.approvals("s1")] == [first.approval_id, second.approval_id]


def test_a_new_run_voids_unconsumed_approvals_and_moves_the_session() -> None:
    store = _store()
    approval = store.issue_approval(_binding(), KEY)
    assert store.new_run("s1") == "s1:2"
    assert store.saga_session("s1") == "s1:2"
    with pytest.raises(ApprovalRefused, match="voided"):
        _begin(store, _state(), approval.approval_id, execution="s1:2")


def test_reconcile_confirmed_records_the_receipt_and_an_event() -> None:
    store = _store()
    _begin(store, _state())
    _finish(store, "uncertain")
    store.reconcile("k1", "confirmed", {"page": "p.md"}, actor="editor", reason="seen live")
    row = store.ledger_get("k1")
    assert row is not None and row.status == "done" and row.result == {"page": "p.md"}
    event = store.events(kind="reconcile")[0]
    assert (event.actor, event.status, event.detail["reason"]) == ("editor", "confirmed", "seen live")


def test_concurrent_executions_consume_an_approval_exactly_once() -> None:
    store = _store()
    approval = store.issue_approval(_binding(), KEY)
    won: list[str] = []
    refused: list[str] = []
    start = threading.Barrier(16)

    def attempt(i: int) -> None:
        start.wait()
        try:
            _begin(store, _state(f"k{i}", step=i), approval.approval_id, execution=f"s1:{i}")
            won.append(f"s1:{i}")
        except ApprovalRefused:
            refused.append(f"s1:{i}")

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 15
    view = store.find_approval("s1", "a" * 64)
    assert view is not None and view.consumed_by == won[0]
    assert len(store.ledger()) == 1 and verify_chain(store.checkpoint_chain("s1")) is None


def test_a_hook_that_survives_a_failed_nested_write_keeps_the_outer_transaction() -> None:
    store = _store()
    _begin(store, _state())

    def hook(tx: MemoryTx) -> None:
        # The nested write fails and rolls back on its own; the recorder goes on.
        with pytest.raises(RuntimeError, match="nested write failed"):
            tx.store.record_event(saga_id="s1", actor="a", kind="k", status="s", hook=_raise)

    _finish(store, "done", hook=hook)
    row = store.ledger_get("k1")
    assert row is not None and row.status == "done"
    assert [e.kind for e in store.events(saga_id="s1")] == ["intent", "tool_call"]


def _raise(_tx: object) -> None:
    raise RuntimeError("nested write failed")

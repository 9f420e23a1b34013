"""The ledger's production operations through the `HarnessStore` port — `reconcile` and
`mark_uncertain` — answer the same on the memory store, SQLite and PostgreSQL; on SQL they
join the caller's unit of work (`within=`) and commit or roll back with it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from evaluation.faults import Rig
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.core.errors import NotFound
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.ledger_status import LedgerStatus
from orchestrator.harness.ports import EventTimes
from orchestrator.store.db import make_engine, unit_of_work
from orchestrator.store.tables import EventRow
from tests.support.rigs import SqlRig


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "memory":
        yield MemoryHarnessStore()
        return
    url = (
        f"sqlite:///{tmp_path / 'ledger.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    rig = SqlRig(make_engine(url))
    yield rig
    rig.engine.dispose()


def at(store: Rig, status: LedgerStatus) -> tuple[str, str]:
    """A saga and a ledger key left at `status` by the harness's own calls."""
    saga = "saga-" + uuid.uuid4().hex[:8]
    store.add_saga(saga, destinations=("fake:one",))
    key = "k-" + uuid.uuid4().hex[:8]
    state = AgentState(
        event_id=uuid.uuid4().hex, step=1, tool="publish", idempotency_key=key, args_digest="d"
    )
    store.begin_effect(
        saga_id=saga, actor="p", state=state, approval_id=None, execution=None, times=EventTimes()
    )
    if status is not LedgerStatus.PENDING:
        event = {
            "saga_id": saga,
            "actor": "p",
            "kind": "tool_call",
            "status": status.value,
            "tool": "publish",
        }
        store.finish_effect(key=key, ledger_status=status, result=None, event=event)
    return saga, key


def reconcile_events(store: Rig, saga: str) -> list[tuple[str, str, dict[str, Any]]]:
    if isinstance(store, MemoryHarnessStore):
        return [(e.actor, e.status, e.detail) for e in store.events(saga_id=saga, kind="reconcile")]
    assert isinstance(store, SqlRig)
    with Session(store.engine) as s:
        rows = s.exec(select(EventRow).where(EventRow.saga_id == saga, EventRow.kind == "reconcile")).all()
        return [(e.actor, e.status, e.detail) for e in rows]


def status(store: Rig, key: str) -> str | None:
    row = store.ledger_get(key)
    return row.status if row else None


def test_reconcile_confirmed_records_the_receipt_and_the_person(store: Rig) -> None:
    saga, key = at(store, LedgerStatus.UNCERTAIN)
    store.reconcile(
        key,
        "confirmed",
        {"path": "/srv/a.md"},
        actor="erin",
        reason="page is live",
        detail={"destination": "site:/srv"},
    )
    row = store.ledger_get(key)
    assert row is not None and row.status == LedgerStatus.DONE and row.result == {"path": "/srv/a.md"}
    assert reconcile_events(store, saga) == [
        (
            "erin",
            "confirmed",
            {"destination": "site:/srv", "key": key, "reason": "page is live", "outcome": "confirmed"},
        )
    ]


def test_reconcile_absent_frees_the_key_for_another_attempt(store: Rig) -> None:
    saga, key = at(store, LedgerStatus.UNCERTAIN)
    store.reconcile(key, "absent", actor="erin", reason="not there")
    row = store.ledger_get(key)
    assert row is not None and row.status == LedgerStatus.ABSENT and row.result is None
    again = AgentState(
        event_id=uuid.uuid4().hex, step=2, tool="publish", idempotency_key=key, args_digest="d"
    )
    store.begin_effect(
        saga_id=saga, actor="p", state=again, approval_id=None, execution=None, times=EventTimes()
    )
    row = store.ledger_get(key)
    assert row is not None and row.status == LedgerStatus.PENDING and row.attempts == 2


def test_reconcile_of_an_unknown_key_is_not_found(store: Rig) -> None:
    with pytest.raises(NotFound):
        store.reconcile("no-such-key", "confirmed")


@pytest.mark.parametrize(
    ("before", "marked", "after"),
    [
        (LedgerStatus.PENDING, True, LedgerStatus.UNCERTAIN),
        (LedgerStatus.UNCERTAIN, True, LedgerStatus.UNCERTAIN),
        (LedgerStatus.DONE, False, LedgerStatus.DONE),
        (LedgerStatus.FAILED, False, LedgerStatus.FAILED),
    ],
)
def test_mark_uncertain_only_touches_a_call_that_may_have_run(
    store: Rig, before: LedgerStatus, marked: bool, after: LedgerStatus
) -> None:
    _, key = at(store, before)
    assert store.mark_uncertain(key) is marked
    assert status(store, key) == after
    assert store.mark_uncertain("no-such-key") is False


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_on_sql_the_port_joins_the_callers_unit_of_work(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path / 'j.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    rig = SqlRig(make_engine(url))
    try:
        saga, key = at(rig, LedgerStatus.UNCERTAIN)
        with pytest.raises(RuntimeError), unit_of_work(rig.engine) as uow:
            rig.reconcile(key, "confirmed", {"r": 1}, actor="erin", reason="r", within=uow)
            raise RuntimeError("the caller's transaction fails after the reconcile")
        assert status(rig, key) == LedgerStatus.UNCERTAIN and reconcile_events(rig, saga) == []
        with unit_of_work(rig.engine) as uow:
            rig.reconcile(key, "confirmed", {"r": 1}, actor="erin", reason="r", within=uow)
        assert status(rig, key) == LedgerStatus.DONE and len(reconcile_events(rig, saga)) == 1
        _, pending = at(rig, LedgerStatus.PENDING)
        with pytest.raises(RuntimeError), unit_of_work(rig.engine) as uow:
            assert rig.mark_uncertain(pending, within=uow)
            raise RuntimeError("rolled back")
        assert status(rig, pending) == LedgerStatus.PENDING
        with pytest.raises(TypeError):
            rig.mark_uncertain(pending, within=object())
    finally:
        rig.engine.dispose()

"""The harness reads the time from the `Clock` it is given, never the wall clock.

An approval past its expiry on that clock is refused although the wall clock says it is
fresh: by the tool path's authorization, and by the store when the intent consumes it. On
SQLite and PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from orchestrator.core.clock import ManualClock
from orchestrator.core.errors import ApprovalRefused
from orchestrator.harness.approvals import ApprovalBinding, mint
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.declare import high_risk
from orchestrator.harness.ports import EventTimes
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import IRREVERSIBLE, ProbeAnswer, ToolCall, ToolContext, ToolStatus
from orchestrator.store.db import make_engine
from orchestrator.toolpath.engine import Caller, Harness
from tests.support.rigs import SqlRig

pytestmark = pytest.mark.integration
KEY = b"clock-key"
DIGEST = "c" * 64


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    saga_id: str
    text: str = "x"


RUNS: list[str] = []


def _run(ctx: ToolContext, a: Args) -> dict[str, Any]:
    RUNS.append(a.saga_id)
    return {"ran": a.text}


PUBLISH = high_risk(
    "publish",
    "publish",
    Args,
    _run,
    key=lambda a: f"p-{a.saga_id}-{a.text}",
    probe=lambda ctx, key: ProbeAnswer(kind="unknown", detail="no idea"),
    compensation=IRREVERSIBLE,
    approval=lambda a: (a.saga_id, DIGEST, "fake:one"),
)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'clock.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def wall() -> datetime:
    return datetime.now(UTC)


def _rig(db_url: str, clock: ManualClock, wall: datetime) -> Iterator[tuple[SqlRig, str, str]]:
    """A rig on `clock` with a saga and its approval, fresh for an hour by the wall clock."""
    rig = SqlRig(make_engine(db_url), clock=clock)
    saga = "saga-" + uuid.uuid4().hex[:8]
    session = rig.add_saga(saga, destinations=("fake:one",))
    binding = ApprovalBinding(
        saga_id=saga,
        version=1,
        version_digest=DIGEST,
        destinations=("fake:one",),
        session=session,
        approver="editor",
        expires_at=wall + timedelta(hours=1),
    )
    approval = rig.add_approval(binding, mint(binding, KEY))
    try:
        yield rig, saga, approval
    finally:
        rig.engine.dispose()


def _publish(rig: SqlRig, clock: ManualClock, saga: str) -> Any:
    harness = Harness(Registry([PUBLISH]), rig, signing_key=KEY, clock=clock)
    caller = Caller(actor="agent", capabilities=frozenset({"publish"}), saga_id=saga)
    return harness.call(ToolCall(tool="publish", arguments={"saga_id": saga}, call_id="c1"), caller)


@pytest.mark.parametrize(
    ("hours", "runs"), [(0, 1), (2, 0)], ids=["fresh-on-the-clock", "expired-on-the-clock"]
)
def test_the_harness_decides_expiry_by_its_clock(db_url: str, wall: datetime, hours: int, runs: int) -> None:
    clock = ManualClock(wall + timedelta(hours=hours))
    for rig, saga, _approval in _rig(db_url, clock, wall):
        RUNS.clear()
        result = _publish(rig, clock, saga)
        assert RUNS.count(saga) == runs
        if runs:
            assert result.status is ToolStatus.OK
        else:
            assert result.status is ToolStatus.REJECTED and "expired" in (result.reason or "")


def test_the_store_refuses_an_approval_expired_on_its_clock(db_url: str, wall: datetime) -> None:
    clock = ManualClock(wall + timedelta(hours=2))
    for rig, saga, approval in _rig(db_url, clock, wall):
        state = AgentState(
            event_id=uuid.uuid4().hex, step=1, tool="publish", idempotency_key="k1", args_digest="d" * 64
        )
        with pytest.raises(ApprovalRefused, match="expired"):
            rig.begin_effect(
                saga_id=saga,
                actor="agent",
                state=state,
                approval_id=approval,
                execution=rig.saga_session(saga),
                times=EventTimes(),
            )
        assert rig.ledger_get("k1") is None  # refused: nothing was written

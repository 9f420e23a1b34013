"""The harness fault scenarios against `SqlHarnessStore`, on SQLite and PostgreSQL.

The same scenarios as `tests/unit/test_harness_faults.py`, through `SqlRig`
(the SQL store plus saga and approval rows); the same store-level sequence on
the memory store and on SQL gives the same answers; and the full publishing
flow through `build_app` with a `memory:` destination that applies and then
times out: `effect-unknown`, one effect, `reconcile confirmed` finishes the
saga without a second call. PostgreSQL comes from `PRESSROOM_TEST_DATABASE_URL`
or the local default, in a fresh database dropped at the end; unreachable, the
tests skip (or fail under `PRESSROOM_REQUIRE_SERVICES=1`).
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import DuplicateTaskNameWarning
from sqlmodel import Session, col, select

from evaluation import fault_scenarios as fs
from evaluation.faults import Rig
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.core.errors import ApprovalRefused, IdempotencyConflict
from orchestrator.core.routing import PUBLISH
from orchestrator.harness.approvals import ApprovalBinding, mint
from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import AgentState, verify_chain
from orchestrator.harness.ports import EventTimes
from orchestrator.harness.spec import ToolCall
from orchestrator.store.db import dispose_all, make_engine, unit_of_work
from orchestrator.store.tables import ApprovalRow, EventRow, LedgerRow, SagaRow
from outbox.broker import InlineBroker
from sagas.destinations.memory import memory_store
from sagas.execution_steps import publisher_grant
from sagas.runner import publisher_caller
from tests.support.rigs import MALFORMED, SAMPLE_CORPUS, SqlRig, malformed_proposals, publish_flow

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh PostgreSQL database for this module, dropped afterwards."""
    admin_url: str = request.getfixturevalue("pg_admin_url")  # skips or fails when unreachable
    import psycopg

    name = f"pressroom_test_{uuid.uuid4().hex[:12]}"
    plain = admin_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    dispose_all()
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'harness.db'}"
    return str(request.getfixturevalue("pg_database"))


@pytest.fixture
def rig(db_url: str) -> Iterator[SqlRig]:
    sql = SqlRig(make_engine(db_url))
    yield sql
    sql.engine.dispose()


# -- the fault scenarios, on SQL ----------------------------------------------------------
IN_FLIGHT_BUG = (
    "BUG: a second caller while the first is in flight re-pends the `pending` ledger row "
    "(store/harness_store.py _ledger_pending) and runs the executor again; see tests/unit/test_harness_faults.py"
)
SCENARIOS = [s for s in fs.SCENARIOS]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_fault_scenario_holds_on_sql(rig: SqlRig, scenario: Any) -> None:
    out = scenario(rig)
    assert out.passed, {k: v for k, v in out.checks.items() if not v}
    assert out.unapproved == 0 and out.duplicates == 0


@pytest.mark.parametrize(("when", "probe"), [("before", True), ("after", True), ("after", False)])
def test_a_crash_on_sql_leaves_a_pending_intent_that_a_restart_settles(
    rig: SqlRig, when: str, probe: bool
) -> None:
    out = fs.crash_restart(rig, when, probe)
    assert out.checks["intent_found"], "the pending ledger row and its checkpoint were committed"
    assert out.statuses == (["ok"] if probe else ["uncertain"])
    assert (
        out.effects == 1 and out.duplicates == 0 and out.naive["duplicates"] == (1 if when == "after" else 0)
    )


def test_malformed_proposals_never_reach_the_executor_on_sql(rig: SqlRig) -> None:
    report = malformed_proposals(rig, n=len(MALFORMED), seed=11)
    assert report["executor_calls"] == 0
    assert {k for k, v in report["by_kind"].items() if v["rejected"] != v["sent"]} == set()


# -- the memory store answers like the SQL store -----------------------------------------------
def _begin_publish(
    store: Rig,
    saga: str,
    key: str,
    digest: str,
    approval_id: str | None,
    execution: str,
    *,
    step: int = 1,
    charge: Charge | None = None,
) -> None:
    """`begin_effect` of a `publish` under `key` with arguments of digest `digest`."""
    state = AgentState(
        event_id=uuid.uuid4().hex, step=step, tool="publish", idempotency_key=key, args_digest=digest
    )
    store.begin_effect(
        saga_id=saga,
        actor="p",
        state=state,
        approval_id=approval_id,
        execution=execution,
        times=EventTimes(),
        charge=charge,
    )


def _approved_saga(store: Rig, now: datetime) -> tuple[str, str, ApprovalBinding, str]:
    """A fresh saga with one destination and a valid approval: (saga, session, binding, approval id)."""
    saga = "saga-" + uuid.uuid4().hex[:8]
    session = store.add_saga(saga, destinations=("fake:one",))
    binding = ApprovalBinding(
        saga_id=saga,
        version=1,
        version_digest="a" * 64,
        destinations=("fake:one",),
        session=session,
        approver="editor",
        expires_at=now + timedelta(hours=1),
    )
    return saga, session, binding, store.add_approval(binding, mint(binding, b"k"))


def _exercise(store: Rig) -> list[str]:
    """One sequence of store calls; what each answered or refused."""
    now = datetime.now(UTC)
    saga, session, binding, approval = _approved_saga(store, now)
    expired = store.add_approval(binding.model_copy(update={"expires_at": now - timedelta(seconds=1)}), "t")
    seen: list[str] = []

    def begin(key: str, digest: str, approval_id: str | None, execution: str, step: int) -> None:
        try:
            _begin_publish(store, saga, key, digest, approval_id, execution, step=step)
            row = store.ledger_get(key)
            seen.append(f"begin {key}: {row.status if row else None} x{row.attempts if row else 0}")
        except (ApprovalRefused, IdempotencyConflict) as exc:
            seen.append(f"begin {key}: {type(exc).__name__}")

    def finish(key: str, status: str) -> None:
        event = {"saga_id": saga, "actor": "p", "kind": "tool_call", "status": status, "tool": "publish"}
        store.finish_effect(
            key=key, ledger_status=status, result={"r": 1} if status == "done" else None, event=event
        )

    begin("k1", "d1", approval, session, 1)
    begin("k1", "d2", None, session, 2)  # other arguments
    begin("k2", "d1", approval, session, 3)  # the same execution goes on
    begin("k3", "d1", approval, "another", 4)  # another execution
    begin("k4", "d1", expired, session, 5)
    finish("k1", "failed")
    begin("k1", "d1", approval, session, 6)
    finish("k1", "done")
    begin("k1", "d1", approval, session, 7)
    finish("k2", "uncertain")
    begin("k2", "d1", None, session, 8)
    store.reconcile("k2", "absent")
    begin("k2", "d1", None, session, 9)
    found = store.find_approval(saga, "a" * 64)
    seen.append(f"latest approval expired={found is not None and found.approval_id == expired}")
    seen.append(f"chain ok={verify_chain(store.checkpoint_chain(saga)) is None}")
    seen.append(f"checkpoints={len(store.checkpoint_chain(saga))}")
    return seen


def test_the_memory_store_answers_like_the_sql_store(rig: SqlRig) -> None:
    expected = _exercise(MemoryHarnessStore())
    assert _exercise(rig) == expected
    assert "begin k1: IdempotencyConflict" in expected and "begin k3: ApprovalRefused" in expected


def test_an_intent_refused_at_any_of_its_writes_leaves_nothing_written(rig: SqlRig) -> None:
    """The intent's charge, consumption, ledger row, checkpoint and event are one statement on
    PostgreSQL: whichever refuses, none of the others is kept (and on SQLite, none is kept either)."""
    from orchestrator.core.errors import KeyInFlight
    from orchestrator.harness.budget import BudgetExhausted
    from orchestrator.store.budget import spent
    from orchestrator.store.tables import CheckpointRow

    saga, session, _, approval = _approved_saga(rig, datetime.now(UTC))

    def begin(key: str, execution: str, limit: int = 0) -> str:
        key = f"{saga}-{key}"  # ledger keys are global: the database is shared with other tests
        try:
            _begin_publish(rig, saga, key, "d", approval, execution, charge=Charge(saga, limit=limit))
        except (ApprovalRefused, BudgetExhausted, IdempotencyConflict, KeyInFlight) as exc:
            return type(exc).__name__
        return "pending"

    def written() -> tuple[int, int, int, int]:
        with Session(rig.engine) as s:
            return (
                spent(s, saga).calls,
                len(s.exec(select(CheckpointRow).where(CheckpointRow.saga_id == saga)).all()),
                len(
                    s.exec(select(EventRow).where(EventRow.saga_id == saga, EventRow.kind == "intent")).all()
                ),
                len(s.exec(select(LedgerRow).where(LedgerRow.saga_id == saga)).all()),
            )

    assert begin("k1", session) == "pending"
    assert written() == (1, 1, 1, 1)
    assert begin("k2", "another execution") == "ApprovalRefused"
    assert begin("k1", session) == "KeyInFlight"  # the approval's consumption and the charge went with it
    assert begin("k3", session, limit=1) == "BudgetExhausted"
    assert written() == (1, 1, 1, 1)
    with Session(rig.engine) as s:
        consumed_by = s.exec(select(ApprovalRow.consumed_by).where(ApprovalRow.id == approval)).one()
    assert consumed_by == session


# -- the full publishing flow ---------------------------------------------------------------------
def test_apply_then_timeout_is_effect_unknown_until_reconcile_confirms_without_a_second_call(
    db_url: str, tmp_path: Path
) -> None:
    out = publish_flow(db_url, tmp_path, status_known=False)
    assert out.passed, {k: v for k, v in out.checks.items() if not v}
    assert out.statuses == ["effect-unknown", "uncertain", "succeeded"]
    dest = memory_store(out.facts["destination"].split(":", 1)[1])
    assert dest.effects == 1 and dest.calls["publish"] == 1
    engine = make_engine(db_url)
    try:
        with Session(engine) as s:
            saga = s.get(SagaRow, out.facts["saga_id"])
            assert saga is not None and saga.state == "succeeded"
            ledger = s.exec(
                select(LedgerRow).where(LedgerRow.saga_id == saga.id, LedgerRow.tool == "publish")
            ).one()
            assert ledger.status == "done" and ledger.result and ledger.result["reconciled_by"] == "editor"
            events = s.exec(
                select(EventRow).where(EventRow.saga_id == saga.id).order_by(col(EventRow.seq))
            ).all()
            reconciled = [e for e in events if e.kind == "reconcile"]
            assert [(e.actor, e.status) for e in reconciled] == [("editor", "confirmed")]
            states = [e.status for e in events if e.kind == "transition"]
            assert states[-3:] == ["effect-unknown", "executing", "succeeded"]
            published = [e for e in events if e.kind == "tool_call" and e.tool == "publish"]
            # After the person confirmed, the step is done: the runner finishes without calling again.
            assert [e.status for e in published] == ["uncertain", "uncertain"]
            assert all(e.proposed_at and e.authorized_at and e.acked_at for e in published)
            assert published[0].sent_at is not None
    finally:
        engine.dispose()


def test_apply_then_timeout_with_a_status_query_succeeds_without_a_person(
    db_url: str, tmp_path: Path
) -> None:
    out = publish_flow(db_url, tmp_path, status_known=True)
    assert out.passed and out.recovered, {k: v for k, v in out.checks.items() if not v}
    assert out.effects == 1 and out.calls == 1


@pytest.mark.record_edited
def test_the_celery_task_path_cannot_skip_the_approval(db_url: str, tmp_path: Path) -> None:
    """A saga marked `executing` with no approval row: the real task runs the harness, which refuses."""
    from orchestrator.celery_app import make_celery, use_app

    name = "side-door-" + uuid.uuid4().hex[:8]
    uri = f"memory:{name}"
    app = build_app(
        Settings(database_url=db_url, broker_url="inline://", secret="s", secret_file=tmp_path / "k"),
        memory_destinations=True,
    )
    assert app.registry is app.harness.registry  # the only registry a Pressroom holds is the wrapped one
    try:
        ready = app.submissions.submit(
            brief="history of the library network",
            corpus=str(SAMPLE_CORPUS),
            destinations=[uri],
            actor="submitter",
        )
        sid = ready["saga_id"]
        with unit_of_work(app.engine) as uow:
            saga = uow.session.get(SagaRow, sid)
            assert saga is not None
            saga.state = "executing"  # as if a bug or an edit skipped the approval
            uow.session.add(saga)
            app.dispatcher.dispatch(
                uow,
                saga_id=sid,
                task=PUBLISH,
                version=ready["version"],
                version_digest=ready["version_digest"],
                capabilities=("publish",),
                grant=publisher_grant([uri]),  # a valid handle: the approval alone is missing
            )
        assert isinstance(app.broker, InlineBroker)
        envelope = app.broker.queue.get_nowait()
        use_app(app)
        with warnings.catch_warnings():
            # celery_app.py registers its tasks as shared (Celery's default), so a second
            # make_celery in one process warns of duplicate names; the callables are equivalent.
            warnings.simplefilter("ignore", DuplicateTaskNameWarning)
            task = make_celery("memory://").tasks[PUBLISH]  # the app finalizes (and warns) here
        handled = task.apply(args=[envelope.payload], kwargs={"message_id": envelope.message_id}).get()
        assert handled == "applied"
        assert memory_store(name).calls["publish"] == 0
        status = app.reads.status(sid)
        assert status["state"] == "failed"
        with Session(app.engine) as s:
            saga = s.get(SagaRow, sid)
            assert saga is not None
            local = app.harness.call(
                ToolCall(
                    tool="publish",
                    call_id="local",
                    arguments={"saga_id": sid, "destination": uri, "version_digest": ready["version_digest"]},
                ),
                publisher_caller(saga, ready["version_digest"]),
            )
        assert local.status.value == "approval_required"
        events = app.reads.history(sid)["events"]
        assert [e["status"] for e in events if e["kind"] == "tool_call" and e["tool"] == "publish"] == [
            "approval_required",
            "approval_required",
        ]
        assert memory_store(name).calls["publish"] == 0
    finally:
        use_app(None)
        app.engine.dispose()

"""Durable per-saga budgets, on SQLite and PostgreSQL.

A saga's agents spend one budget kept in `saga_budgets`, charged with each
call's intent (a read: with its result), so a role turn run again after a
crash — its first run's calls committed, its finalizer never reached —
continues the count instead of starting again. A spent budget fails the saga
with "budget exhausted: …", seen through the CLI, and nothing is called after.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from orchestrator.core.routing import RESEARCH
from orchestrator.store.budget import spent
from orchestrator.store.db import unit_of_work
from orchestrator.store.tables import EventRow, WorkRow
from outbox.messages import Handoff
from tests.conftest import Cli, base_env
from tests.integration.helpers import make_app

BRIEF = "history of the library network"


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return (
        f"sqlite:///{tmp_path / 'b.db'}"
        if request.param == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )


def test_a_clean_saga_spends_its_calls_and_exhaustion_fails_it(db: str, tmp_path: Path, corpus: Path) -> None:
    # Research (a search, three reads and its evidence), a draft, a review (three reads and its
    # record): ten calls.
    app = make_app(db, tmp_path, saga_budget=10)
    ok = app.submissions.submit(brief=BRIEF, corpus=str(corpus), destinations=["memory:b1"], actor="dana")
    assert ok["state"] == "ready-for-review", ok
    with Session(app.engine) as s:
        assert spent(s, ok["saga_id"]).calls == 10

    tight = make_app(db, tmp_path, saga_budget=9)
    out = tight.submissions.submit(brief=BRIEF, corpus=str(corpus), destinations=["memory:b2"], actor="dana")
    cli = Cli(base_env(PRESSROOM_DATABASE_URL=db, PRESSROOM_BROKER_URL="inline://"), tmp_path)
    status = cli.json("status", out["saga_id"])
    assert status["state"] == "failed", status
    history = cli.json("history", out["saga_id"])["events"]
    failed = [e for e in history if e["kind"] == "transition" and e["status"] == "failed"]
    assert failed and str(failed[-1]["detail"].get("reason", "")).startswith("budget exhausted: 9 of 9"), (
        failed
    )
    # The review was refused before it ran: no review row, nothing after the refusal.
    reviews = [e for e in history if e["kind"] == "tool_call" and e["tool"] == "review.record"]
    assert [e["status"] for e in reviews] == ["rejected"]


def test_a_turn_run_again_after_a_crash_continues_the_count(db: str, tmp_path: Path, corpus: Path) -> None:
    # No broker delivery: the research turn is run here by hand, as a worker would.
    app = make_app(db, tmp_path, saga_budget=7, broker_url="none://")
    sid = app.submissions.submit(brief=BRIEF, corpus=str(corpus), destinations=["memory:b3"], actor="dana")[
        "saga_id"
    ]
    with Session(app.engine) as s:
        work = s.exec(select(WorkRow).where(WorkRow.saga_id == sid, WorkRow.task == RESEARCH)).one()
        handoff = Handoff.model_validate(work.payload)
    research = app.handlers[RESEARCH]
    research(handoff, "worker-1")  # the first run: its calls commit, then the worker dies (no finalizer)
    with Session(app.engine) as s:
        assert spent(s, sid).calls == 5
    finalize = research(handoff, "worker-2")  # the lease brings the turn back
    with unit_of_work(app.engine) as uow:
        finalize(uow)
    with Session(app.engine) as s:
        assert spent(s, sid).calls == 7, "the second run continued from 5, not from 0"
        reasons = [
            e.detail.get("reason")
            for e in s.exec(select(EventRow).where(EventRow.saga_id == sid).order_by(col(EventRow.seq))).all()
            if e.kind == "transition"
        ]
    cli = Cli(base_env(PRESSROOM_DATABASE_URL=db, PRESSROOM_BROKER_URL="none://"), tmp_path)
    assert cli.json("status", sid)["state"] == "failed"
    assert str(reasons[-1]).startswith("budget exhausted: 7 of 7"), reasons

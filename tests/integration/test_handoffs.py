"""Handoffs between roles: capabilities only shrink (invariant 7), and a
handoff that asks for more than its role may have is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select

from orchestrator.core.errors import PolicyRefused
from orchestrator.core.routing import DRAFT
from orchestrator.store.db import unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from outbox.messages import Envelope, Handoff
from roles.handlers import capabilities_for
from tests.integration.helpers import make_app


def test_the_receiving_side_narrows_and_refuses_anything_wider() -> None:
    asked = Handoff(saga_id="s", work_id="w", capabilities=("draft.write",))
    assert capabilities_for("writer", asked) == frozenset({"draft.write"})
    wider = Handoff(saga_id="s", work_id="w", capabilities=("draft.write", "publish"))
    with pytest.raises(PolicyRefused, match="publish"):
        capabilities_for("writer", wider)
    assert capabilities_for("writer", Handoff(saga_id="s", work_id="w")) == frozenset()


def test_a_widened_handoff_changes_nothing_and_fails_the_saga(
    sqlite_url: str, tmp_path: Path, corpus: Path
) -> None:
    held = make_app(sqlite_url, tmp_path, broker_url="none://")
    sid = held.submissions.submit(
        brief="library network", corpus=str(corpus), destinations=["memory:w"], actor="dana"
    )["saga_id"]
    with unit_of_work(held.engine) as uow:  # a forged handoff of this round asking the writer to publish
        held.dispatcher.dispatch(
            uow,
            saga_id=sid,
            task=DRAFT,
            round=1,
            role="writer",
            capabilities=("draft.write", "publish", "approval.grant"),
        )
    app = make_app(sqlite_url, tmp_path)
    with Session(app.engine) as s:
        forged = s.exec(select(OutboxRow).where(OutboxRow.task == DRAFT)).one()
        env = Envelope(message_id=forged.id, task=forged.task, queue=forged.queue, payload=forged.payload)
    assert app.consumer.handle(env) == "applied"
    status = app.reads.status(sid)
    assert status["state"] == "failed"
    assert "publish" in status["reason"] and "not granted" in status["reason"]
    assert status["version"] == 0, "the writer wrote nothing"
    tool_calls = [e for e in app.reads.history(sid)["events"] if e["kind"] == "tool_call"]
    assert tool_calls == []

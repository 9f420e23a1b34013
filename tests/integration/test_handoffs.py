"""Handoffs between roles: capabilities only shrink (invariant 7). Authority comes from the
signed handle a handoff carries, never from the names it lists; a handle wider than its
role's kind, or none where its work row records one, is refused with an event and fails the
saga (a person retries); work an earlier release queued gets the handle its grant mints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, select

from orchestrator.core.errors import PolicyRefused
from orchestrator.core.pipeline import RoleDecl
from orchestrator.core.routing import DRAFT
from orchestrator.harness.handles import Grant, Handle, Task, encode
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from outbox.messages import Envelope, Handoff
from roles.handlers import capabilities_for
from tests.integration.helpers import make_app

NOW = datetime(2026, 12, 4, tzinfo=UTC)


def handle(*actions: str) -> Handle:
    return Handle(id="h", saga_id="s", role="writer", actions=actions, expires_at=NOW, depth=1)


def test_the_receiving_side_narrows_and_refuses_anything_wider() -> None:
    assert capabilities_for("writer", handle("draft.write")) == frozenset({"draft.write"})
    with pytest.raises(PolicyRefused, match="publish"):
        capabilities_for("writer", handle("draft.write", "publish"))
    assert capabilities_for("writer", handle()) == frozenset()
    # A role's declared `mcp:` tools are within its table; undeclared ones are not.
    declared = RoleDecl(name="writer", kind="writer", tools=("mcp:docs/search",))
    assert capabilities_for("writer", handle("mcp:docs/search"), declared) == {"mcp:docs/search"}
    with pytest.raises(PolicyRefused, match="mcp:docs/other"):
        capabilities_for("writer", handle("mcp:docs/other"), declared)


def _deliver_draft(
    sqlite_url: str, tmp_path: Path, corpus: Path, *, strip: bool = False, **dispatch: object
) -> tuple[Pressroom, str]:
    """Queue the writer's work as `dispatch` says and deliver it once (`strip`: its message
    without the handle its work row records)."""
    held = make_app(sqlite_url, tmp_path, broker_url="none://")
    sid = held.submissions.submit(
        brief="library network", corpus=str(corpus), destinations=["memory:w"], actor="dana"
    )["saga_id"]
    with unit_of_work(held.engine) as uow:
        held.dispatcher.dispatch(uow, saga_id=sid, task=DRAFT, round=1, role="writer", **dispatch)  # type: ignore[arg-type]
    app = make_app(sqlite_url, tmp_path)
    with Session(app.engine) as s:
        sent = s.exec(select(OutboxRow).where(OutboxRow.task == DRAFT)).one()
        payload = {k: v for k, v in sent.payload.items() if not (strip and k == "handle")}
        env = Envelope(message_id=sent.id, task=sent.task, queue=sent.queue, payload=payload)
    assert app.consumer.handle(env) == "applied"
    return app, sid


def test_a_widened_handle_changes_nothing_and_fails_the_saga(
    sqlite_url: str, tmp_path: Path, corpus: Path
) -> None:
    wide = frozenset({"draft.write", "publish", "approval.grant"})
    app, sid = _deliver_draft(
        sqlite_url, tmp_path, corpus, grant=Grant("writer", wide, Task(wide, corpus=str(corpus)))
    )
    status = app.reads.status(sid)
    assert status["state"] == "failed"
    assert "publish" in status["reason"] and "not granted" in status["reason"]
    assert status["version"] == 0, "the writer wrote nothing"
    events = app.reads.history(sid)["events"]
    assert [e for e in events if e["kind"] == "tool_call"] == []
    refused = [e for e in events if e["kind"] == "capability"]
    assert [(e["status"], e["detail"]["problem"]) for e in refused] == [("refused", "widened")]


def test_work_an_earlier_release_queued_goes_on_under_its_grant_not_its_names(
    sqlite_url: str, tmp_path: Path, corpus: Path
) -> None:
    """Work queued with names and no handle (by a release before handles): the worker mints
    the handle the writer's grant gives, whatever names the handoff lists."""
    app, sid = _deliver_draft(sqlite_url, tmp_path, corpus, capabilities=("draft.write", "publish"))
    events = app.reads.history(sid)["events"]
    capability = [
        (e["actor"], e["status"], e["detail"]["why"], e["detail"]["actions"])
        for e in events
        if e["kind"] == "capability"
    ]
    assert capability == [
        ("writer", "minted", "queued by a release before capability handles", ["draft.write"])
    ]
    # The writer's turn ran under the minted handle (and, no research having run, found no evidence).
    assert app.reads.status(sid)["reason"] == "no evidence to write from"


def test_a_message_stripped_of_its_handle_is_refused(sqlite_url: str, tmp_path: Path, corpus: Path) -> None:
    """The work row records a handle; its message arrives without: refused as `missing`, the saga
    fails with the reason and its event, and a retry prepares it again under handles."""
    writer = frozenset({"draft.write"})
    grant = Grant("writer", writer, Task(writer, corpus=str(corpus)))
    app, sid = _deliver_draft(sqlite_url, tmp_path, corpus, strip=True, grant=grant)
    status = app.reads.status(sid)
    assert status["state"] == "failed" and status["version"] == 0
    assert status["reason"] == "refused handoff: the handoff carries no capability handle"
    events = app.reads.history(sid)["events"]
    assert [e["detail"]["problem"] for e in events if e["kind"] == "capability"] == ["missing"]
    retried = app.reviews.retry(sid, actor="olga")
    assert retried["state"] == "ready-for-review" and retried["version"] == 1, retried


def test_the_publisher_acts_only_under_a_publisher_handle(sqlite_url: str, tmp_path: Path) -> None:
    """Wider than the publisher's table, for another role or saga, or forged: every call refused."""
    app = make_app(sqlite_url, tmp_path)
    key = app.signing_key
    good = Handle(
        id="w",
        saga_id="s",
        role="publisher",
        actions=("publish",),
        destinations=("memory:a",),
        expires_at=NOW,
        depth=1,
    )
    later = good.model_copy(update={"expires_at": app.clock.now() + timedelta(hours=1)})

    def authority(handle: Handle, key: bytes = key) -> str | None:
        return app.runner.authority(Handoff(saga_id="s", work_id="w", handle=encode(handle, key)))[1]

    assert authority(later) is None
    assert "wider: corpus.read" in (
        authority(later.model_copy(update={"actions": ("corpus.read", "publish")})) or ""
    )
    assert "is for role 'writer'" in (authority(later.model_copy(update={"role": "writer"})) or "")
    assert "another saga" in (authority(later.model_copy(update={"saga_id": "t"})) or "")
    assert "expired" in (authority(good) or "")
    assert "does not verify" in (authority(later, b"another key") or "")
    app.engine.dispose()

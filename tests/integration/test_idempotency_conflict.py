"""A business key reused with other arguments is a conflict, through `Harness.call`.

The key names the effect, the arguments say what it is: a second call whose
key function gives the same key for other arguments must not be answered
from the first call's record (that would report the other arguments as done)
and must not run the executor again. On SQLite and PostgreSQL, with a full
app (`build_app`) and its SQL harness store, for a reversible write and for a
high-risk tool (which is authorized by its approval, read with the ledger row).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.harness.capabilities import Capabilities
from orchestrator.harness.declare import high_risk, reversible_write
from orchestrator.harness.spec import IRREVERSIBLE, NO_PROBE, Refusal, ToolCall, ToolContext, ToolStatus
from orchestrator.pressroom import Pressroom
from orchestrator.toolpath.engine import Caller
from tests.integration.helpers import make_app, ready_saga

DESTINATION = "memory:conflict"


class NoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str
    body: str


class SendArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    saga_id: str
    version_digest: str
    destination: str
    body: str


class Ran:
    """The executors of this file's tools: the arguments of every run."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.sends: list[str] = []

    def note(self, ctx: ToolContext, a: NoteArgs) -> dict[str, Any]:
        self.notes.append(a.body)
        return {"noted": a.body}

    def send(self, ctx: ToolContext, a: SendArgs) -> dict[str, Any]:
        self.sends.append(a.body)
        return {"sent": a.body}

    def tools(self) -> list[Any]:
        return [
            # The key leaves `body` out: two bodies under one topic share it.
            reversible_write(
                "note.write", "keep a note", NoteArgs, self.note, key=lambda a: f"note:{a.topic}"
            ),
            high_risk(
                "note.send",
                "send a note to the saga's destination",
                SendArgs,
                self.send,
                key=lambda a: f"send:{a.saga_id}:{a.destination}",
                probe=NO_PROBE,
                compensation=IRREVERSIBLE,
                approval=lambda a: (a.saga_id, a.version_digest, a.destination),
            ),
        ]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'conflict.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
def app(db_url: str, tmp_path: Path, ran: Ran) -> Iterator[Pressroom]:
    """An app whose messages stay in the outbox (`none://`): nothing but the calls here runs."""
    settings = Settings(
        database_url=db_url,
        broker_url="none://",
        secret="integration-secret",
        secret_file=tmp_path / "secret",
    )
    built = build_app(settings, memory_destinations=True, extra_tools=ran.tools())
    yield built
    built.close()


def _call(app: Pressroom, tool: str, arguments: dict[str, Any], caller: Caller, call_id: str) -> Any:
    return app.harness.call(ToolCall(tool=tool, arguments=arguments, call_id=call_id), caller)


def test_a_reversible_writes_key_with_other_arguments_is_a_conflict(app: Pressroom, ran: Ran) -> None:
    caller = Caller(actor="noter", capabilities=Capabilities({"note.write"}))
    first = _call(app, "note.write", {"topic": "canal", "body": "opened 1822"}, caller, "c1")
    assert (first.status, first.output) == (ToolStatus.OK, {"noted": "opened 1822"}), first

    other = _call(app, "note.write", {"topic": "canal", "body": "closed 1822"}, caller, "c2")

    assert other.status is ToolStatus.REJECTED, other
    assert other.refusal is Refusal.CONFLICT, other
    assert other.reason == "idempotency key note:canal was used with other arguments"
    assert other.output is None, "the first call's record is not the answer to other arguments"
    assert ran.notes == ["opened 1822"], "the executor ran once"

    again = _call(app, "note.write", {"topic": "canal", "body": "opened 1822"}, caller, "c3")
    assert (again.status, again.output) == (ToolStatus.REPLAYED, {"noted": "opened 1822"}), again
    assert ran.notes == ["opened 1822"]


def _approved_saga(db_url: str, tmp_path: Path, corpus: Path, app: Pressroom) -> dict[str, Any]:
    """A saga approved for `DESTINATION`: researched, written and reviewed in-process first."""
    inline = make_app(db_url, tmp_path)
    try:
        saga_id = ready_saga(inline, corpus, [DESTINATION])["saga_id"]
    finally:
        inline.close()
    return app.reviews.approve(saga_id, version=1, actor="erin")


def test_a_high_risk_tools_key_with_other_arguments_is_a_conflict_not_an_approved_replay(
    app: Pressroom, ran: Ran, db_url: str, tmp_path: Path, corpus: Path
) -> None:
    approved = _approved_saga(db_url, tmp_path, corpus, app)
    saga_id = approved["saga_id"]
    caller = Caller(actor="sender", capabilities=Capabilities({"note.send"}), saga_id=saga_id)
    bound = {"saga_id": saga_id, "version_digest": approved["version_digest"], "destination": DESTINATION}

    first = _call(app, "note.send", {**bound, "body": "the approved text"}, caller, "s1")
    assert (first.status, first.output) == (ToolStatus.OK, {"sent": "the approved text"}), first

    other = _call(app, "note.send", {**bound, "body": "text nobody approved"}, caller, "s2")

    assert other.status is ToolStatus.REJECTED, other
    assert other.refusal is Refusal.CONFLICT, other
    assert other.reason == f"idempotency key send:{saga_id}:{DESTINATION} was used with other arguments"
    assert other.output is None
    assert ran.sends == ["the approved text"], "the executor ran once"
    statuses = [
        e["status"]
        for e in app.reads.history(saga_id)["events"]
        if e["kind"] == "tool_call" and e["tool"] == "note.send"
    ]
    assert statuses.count("rejected") == 1, statuses

"""The harness's write path, counted on SQLite and PostgreSQL with SQLAlchemy events.

An effectful call takes two transactions on one pooled connection (the intent
with its checkpoint and ledger row; then the result), a read-only call one,
a replay one. Counts, not time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from sqlalchemy import event

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.harness.capabilities import Capabilities
from orchestrator.harness.declare import read_only, reversible_write
from orchestrator.harness.spec import ToolCall, ToolContext, ToolStatus
from orchestrator.pressroom import Pressroom
from orchestrator.toolpath.engine import Caller


class NoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int


def _note(ctx: ToolContext, a: NoteArgs) -> dict[str, Any]:
    return {"noted": a.n}


TOOLS = [
    reversible_write(
        "count.write", "a write that touches nothing", NoteArgs, _note, key=lambda a: f"count-{a.n}"
    ),
    read_only("count.read", "a read that touches nothing", NoteArgs, _note),
]
CALLER = Caller(actor="counter", capabilities=Capabilities({"count.write", "count.read"}))


@pytest.fixture(params=["sqlite", "postgresql"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pressroom]:
    url = (
        f"sqlite:///{tmp_path / 'tx.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    )
    settings = Settings(database_url=url, broker_url="inline://", secret="s", secret_file=tmp_path / "k")
    yield build_app(settings, extra_tools=TOOLS)


class Counts:
    def __init__(self, app: Pressroom) -> None:
        self.transactions = self.connections = self.statements = 0
        engine = app.engine

        def begun(conn: Any) -> None:
            self.transactions += 1

        def checked_out(*_: Any) -> None:
            self.connections += 1

        def statement(*_: Any) -> None:
            self.statements += 1

        event.listen(engine, "begin", begun)
        event.listen(engine.pool, "checkout", checked_out)
        event.listen(engine, "before_cursor_execute", statement)
        self._off = lambda: (
            event.remove(engine, "begin", begun),
            event.remove(engine.pool, "checkout", checked_out),
            event.remove(engine, "before_cursor_execute", statement),
        )

    def __enter__(self) -> Counts:
        return self

    def __exit__(self, *_: object) -> None:
        self._off()


def _call(app: Pressroom, tool: str, n: int) -> ToolStatus:
    return app.harness.call(ToolCall(tool=tool, arguments={"n": n}, call_id=f"{tool}-{n}"), CALLER).status


def test_an_effectful_call_is_two_transactions_on_one_connection(app: Pressroom) -> None:
    assert _call(app, "count.write", 0) is ToolStatus.OK  # warm: the schema and the pool
    with Counts(app) as first:
        assert _call(app, "count.write", 1) is ToolStatus.OK
    assert (first.transactions, first.connections) == (2, 1), vars(first)
    with Counts(app) as replay:
        assert _call(app, "count.write", 1) is ToolStatus.REPLAYED
    assert (replay.transactions, replay.connections) == (1, 1), vars(replay)


def test_a_read_only_call_is_one_transaction(app: Pressroom) -> None:
    assert _call(app, "count.read", 0) is ToolStatus.OK
    with Counts(app) as read:
        assert _call(app, "count.read", 1) is ToolStatus.OK
    assert (read.transactions, read.connections) == (1, 1), vars(read)

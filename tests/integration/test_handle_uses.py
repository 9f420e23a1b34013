"""The durable count of a capability handle's uses, on SQLite and PostgreSQL: the same call
again counts once (a redelivery, a retry), a different call past the count is refused, and
a refused intent leaves no use behind; a read spends its use in its record."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, select

from orchestrator.core.errors import PolicyRefused
from orchestrator.harness.handles import Handle, HandleUse, use_key
from orchestrator.harness.spec import ToolCall, ToolResult, ToolStatus
from orchestrator.store.db import unit_of_work
from orchestrator.store.handle_uses import HandleUseRow, SqlHandleUses
from orchestrator.toolpath.engine import Caller
from tests.integration.helpers import make_app


def use(call: str, *, action: str = "publish", handle: str = "h1") -> HandleUse:
    return HandleUse(handle, "s1", action, use_key("publish", call), limit=1)


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_replay_counts_once_and_a_new_call_past_the_count_is_refused(
    db: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    app = make_app(request.getfixturevalue("sqlite_url" if db == "sqlite" else "pg_url"), tmp_path)
    uses = SqlHandleUses()
    try:
        for _ in range(2):  # the call, then its redelivery
            with unit_of_work(app.engine) as uow:
                uses.spend(uow, use("digest-a"))
        with pytest.raises(PolicyRefused, match="no 'publish' uses left"), unit_of_work(app.engine) as uow:
            uses.spend(uow, use("digest-b"))
        with unit_of_work(app.engine) as uow:  # another action, another handle: counts of their own
            uses.spend(uow, use("digest-b", action="publish.compensate"))
            uses.spend(uow, use("digest-b", handle="h2"))
        with pytest.raises(RuntimeError), unit_of_work(app.engine) as uow:
            uses.spend(uow, use("digest-c", handle="h3"))
            raise RuntimeError("the intent did not commit")
        with Session(app.engine) as s:
            rows = s.exec(select(HandleUseRow.handle_id, HandleUseRow.action)).all()
        assert sorted(rows) == [("h1", "publish"), ("h1", "publish.compensate"), ("h2", "publish")]
    finally:
        app.engine.dispose()


def test_a_counted_read_spends_its_use_in_its_record(sqlite_url: str, tmp_path: Path, corpus: Path) -> None:
    """Through the tool path: the same read again is not a second use; another read past the
    count is refused with its event, and its answer withheld."""
    app = make_app(sqlite_url, tmp_path)
    try:
        sid = app.submissions.submit(
            brief="library network", corpus=str(corpus), destinations=["memory:r"], actor="dana"
        )["saga_id"]
        handle = Handle(
            id="reads",
            saga_id=sid,
            role="researcher",
            actions=("corpus.search",),
            corpus=str(corpus),
            counts={"corpus.search": 1},
            expires_at=app.clock.now() + timedelta(hours=1),
            depth=0,
        )
        caller = Caller(
            actor="researcher", capabilities=frozenset(handle.actions), saga_id=sid, handle=handle
        )

        def search(query: str) -> ToolResult:
            args = {"saga_id": sid, "query": query}
            return app.harness.call(ToolCall(tool="corpus.search", arguments=args, call_id=query), caller)

        assert search("library").status is ToolStatus.OK
        assert search("library").status is ToolStatus.OK, "the same call again is the same use"
        refused = search("network")
        assert refused.status is ToolStatus.REJECTED and refused.output is None
        assert refused.reason == "capability handle reads has no 'corpus.search' uses left (1 allowed)"
        with Session(app.engine) as s:
            assert len(s.exec(select(HandleUseRow).where(HandleUseRow.handle_id == "reads")).all()) == 1
        rejected = [
            e["detail"]["reason"]
            for e in app.reads.history(sid)["events"]
            if e["kind"] == "tool_call" and e["status"] == "rejected"
        ]
        assert rejected == [refused.reason]
    finally:
        app.engine.dispose()

"""The durable count of a capability handle's uses, on SQLite and PostgreSQL: the same call
again counts once (a redelivery, a retry), a different call past the count is refused, and
a refused intent leaves no use behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select

from orchestrator.core.errors import PolicyRefused
from orchestrator.harness.handles import HandleUse, use_key
from orchestrator.store.db import unit_of_work
from orchestrator.store.handle_uses import HandleUseRow, SqlHandleUses
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

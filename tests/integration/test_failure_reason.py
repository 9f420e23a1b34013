"""The first definite cause of a failure is the saga's reason, even when a later delivery records it.

A publish round learns why a step failed (here: the webhook refused the
connection); the saga's `failed` transition may be written by a later
delivery of the same work (the worker lost its lease after undoing the other
step, say). That delivery must still name the cause, not a placeholder.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from sqlmodel import Session, select

from orchestrator.store.tables import WorkRow
from outbox.messages import Handoff
from tests.integration.helpers import make_app, ready_saga

REFUSED = "Connection refused"


class LeaseLost(Exception):
    """What a worker meets when its lease was taken from it between two rounds."""


def refusing_url() -> str:
    """A loopback URL where nothing listens: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_failure_recorded_by_a_later_delivery_keeps_its_cause(
    db: str, request: pytest.FixtureRequest, tmp_path: Path, corpus: Path
) -> None:
    db_url = request.getfixturevalue("sqlite_url" if db == "sqlite" else "pg_url")
    hook = f"webhook:{refusing_url()}"
    memory = f"memory:reason-{db}"
    app = make_app(db_url, tmp_path, webhook_allow="127.0.0.1")
    saga = ready_saga(app, corpus, [hook, memory])
    sid = saga["saga_id"]
    # Approved with no broker: the publish message waits in the outbox.
    held = make_app(db_url, tmp_path, broker_url="none://", webhook_allow="127.0.0.1")
    held.reviews.approve(sid, version=saga["version"], actor="erin")
    with Session(held.engine) as session:
        work = _publish_work(session, sid)
    handoff = Handoff.model_validate(work.payload)  # with the handle approve minted

    # First delivery: round 1 publishes both (the webhook refuses, memory applies), round 2
    # records the failure and undoes memory; then the lease is gone before round 3.
    renewals = [0]

    def renew(work_id: str, holder: str) -> None:
        renewals[0] += 1
        if renewals[0] == 2:
            raise LeaseLost(work_id)

    held.runner.renew = renew
    with pytest.raises(LeaseLost):
        held.runner.handle(handoff, "worker-that-lost-its-lease")
    mid = held.reads.status(sid)
    assert mid["state"] == "executing"
    assert {d["uri"]: d["state"] for d in mid["destinations"]} == {hook: "failed", memory: "compensated"}
    held.engine.dispose()

    # The work is delivered again, to a worker that never saw the calls.
    app.consumer.drain()
    status = app.reads.status(sid)
    assert status["state"] == "failed"
    assert status["reason"].startswith(f"{hook}: error: ")
    assert REFUSED in status["reason"], status["reason"]
    events = app.reads.history(sid)["events"]
    failed_step = [e for e in events if e["kind"] == "step" and e["status"] == "failed"]
    assert [REFUSED in e["detail"]["reason"] for e in failed_step] == [True]
    transition = [e for e in events if e["kind"] == "transition" and e["status"] == "failed"]
    assert len(transition) == 1 and REFUSED in transition[0]["detail"]["reason"]


def _publish_work(session: Session, saga_id: str) -> WorkRow:
    rows = session.exec(
        select(WorkRow).where(WorkRow.saga_id == saga_id, WorkRow.done_at == None)  # noqa: E711
    ).all()
    [work] = [row for row in rows if row.task.endswith("publish")]
    return work

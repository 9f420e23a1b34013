"""Races an attacker can start: one dead letter requeued many times, first users added at once.

The attack: several operators (or one script in a loop) requeue the same dead
letter by an id prefix at the same moment. Threads meet at a barrier and
each calls the service `pressroom dead-letters requeue` calls; exactly one
outbox row may come of it, and every other caller is refused.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlmodel import Session, col, select

from orchestrator import people
from orchestrator.core.errors import Refused
from orchestrator.core.routing import RESEARCH
from orchestrator.store import dead_letters
from orchestrator.store.ops_tables import DeadLetterRow
from orchestrator.store.outbox_tables import OutboxRow
from tests.integration.helpers import make_app

CALLERS = 8


def test_concurrent_requeues_send_a_dead_letter_once(either_db_url: str, tmp_path: Path) -> None:
    app = make_app(either_db_url, tmp_path, broker_url="none://")
    dead_id = dead_letters.record(
        app.engine, reason="handler refused it", body={"work_id": "w-1", "note": "poison"}, task=RESEARCH
    )
    barrier = threading.Barrier(CALLERS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def requeue(prefix: str) -> None:
        barrier.wait()
        try:
            app.operations.requeue_dead_letter(prefix, actor="olga")
            outcome = "sent"
        except Refused as exc:
            outcome = f"refused: {exc}"
        with lock:
            outcomes.append(outcome)

    # half by the full id (a row lock), half by a prefix (the path that raced)
    threads = [
        threading.Thread(target=requeue, args=(dead_id if i % 2 else dead_id[:8],)) for i in range(CALLERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(outcomes) == CALLERS, outcomes
    assert outcomes.count("sent") == 1, outcomes
    assert all("requeued already" in o for o in outcomes if o != "sent"), outcomes
    with Session(app.engine) as s:
        sent = s.exec(select(OutboxRow).where(col(OutboxRow.task) == RESEARCH)).all()
        row = s.get(DeadLetterRow, dead_id)
    assert len(sent) == 1, [r.id for r in sent]
    assert row is not None and row.requeued_as == sent[0].id and row.requeued_by == "olga"


def test_a_prefix_with_like_wildcards_matches_nothing(sqlite_url: str, tmp_path: Path) -> None:
    app = make_app(sqlite_url, tmp_path, broker_url="none://")
    dead_letters.record(app.engine, reason="x", body={"work_id": "w"}, task=RESEARCH)
    for prefix in ("%%%%%%", "______", "%_%_%_"):
        try:
            app.operations.requeue_dead_letter(prefix, actor="olga")
        except Exception as exc:  # NotFound: only hex prefixes are matched
            assert type(exc).__name__ == "NotFound", exc
        else:
            raise AssertionError(f"{prefix!r} requeued a dead letter")


def test_concurrent_first_users_through_the_service_make_one_admin(
    either_db_url: str, tmp_path: Path
) -> None:
    """The same race as `pressroom users add` from many shells, without process start-up to spread it."""
    app = make_app(either_db_url, tmp_path, broker_url="none://")
    barrier = threading.Barrier(CALLERS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def add(i: int) -> None:
        barrier.wait()
        try:
            people.add_user(app.people, None, f"admin{i}", ["admin"])
            outcome = "added"
        except Refused as exc:
            outcome = str(exc)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes.count("added") == 1, outcomes
    # a late one finds closed mode before it starts (no token) or inside the lock (a user exists)
    late = ("a user exists already", "not authenticated")
    assert all(o.startswith(late) for o in outcomes if o != "added"), outcomes
    assert len(app.people.list_users()) == 1

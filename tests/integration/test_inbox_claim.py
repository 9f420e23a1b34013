"""The inbox claim: one statement that writes the row unless the message was applied already;
and `settle`, the claim with the completion of the work the message carries."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, func, select

from orchestrator.store.db import make_engine, unit_of_work
from orchestrator.store.outbox_tables import InboxRow
from orchestrator.store.tables import WorkRow
from orchestrator.store.work import claim_lease, new_work
from outbox.inbox import already_applied, claim, settle


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    return sqlite_url if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


def test_a_message_is_claimed_once(url: str) -> None:
    engine = make_engine(url)
    with unit_of_work(engine) as uow:
        assert claim(uow.session, "m-1", "writer")
        assert already_applied(uow.session, "m-1")
    with unit_of_work(engine) as uow:
        assert not claim(uow.session, "m-1", "writer")
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(InboxRow)).one() == 1


def test_a_rolled_back_claim_leaves_the_message_unapplied(url: str) -> None:
    engine = make_engine(url)
    with unit_of_work(engine) as uow:
        assert claim(uow.session, "m-2", "writer")
        uow.session.rollback()
    with unit_of_work(engine) as uow:
        assert claim(uow.session, "m-2", "writer")


def test_a_concurrent_copy_waits_for_the_first_claim_and_is_a_duplicate(pg_url: str) -> None:
    engine = make_engine(pg_url)
    first = unit_of_work(engine)
    uow = first.__enter__()
    try:
        assert claim(uow.session, "m-3", "writer")  # written, not yet committed
        answers: list[bool] = []
        copy = threading.Thread(target=lambda: answers.append(_claim_alone(engine, "m-3")))
        copy.start()
        copy.join(timeout=1.0)
        assert copy.is_alive(), "the copy did not wait for the first claim"
    finally:
        first.__exit__(None, None, None)  # commits
    copy.join(timeout=10)
    assert answers == [False]


def _claim_alone(engine: Engine, message_id: str) -> bool:
    with unit_of_work(engine) as uow:
        return claim(uow.session, message_id, "writer")


def _held_work(engine: Engine, holder: str) -> str:
    with unit_of_work(engine) as uow:
        row = new_work(uow.session, saga_id="s-1", task="roles.write", queue="writer", payload={}, lease=60)
        uow.session.flush()
        work_id = row.id
        assert claim_lease(uow.session, work_id, holder, 60) == 1
    return work_id


def _state(engine: Engine, work_id: str) -> tuple[int, bool]:
    with Session(engine) as s:
        inbox = s.exec(select(func.count()).select_from(InboxRow)).one()
        work = s.get(WorkRow, work_id)
        assert work is not None
        return inbox, work.done_at is not None


def test_settle_claims_the_message_and_completes_its_work(url: str) -> None:
    engine = make_engine(url)
    work_id = _held_work(engine, "m-10")
    with unit_of_work(engine) as uow:
        assert settle(uow.session, "m-10", "writer", work_id=work_id, saga_id="s-1") == "applied"
    assert _state(engine, work_id) == (1, True)
    with unit_of_work(engine) as uow:  # a copy of the message, afterwards
        assert settle(uow.session, "m-10", "writer", work_id=work_id, saga_id="s-1") == "duplicate"
    assert _state(engine, work_id) == (1, True)


def test_settle_by_a_message_that_lost_the_lease_writes_nothing_once_rolled_back(url: str) -> None:
    engine = make_engine(url)
    work_id = _held_work(engine, "m-11")
    with unit_of_work(engine) as uow:  # another copy, whose lease was taken over by m-11
        assert settle(uow.session, "m-12", "writer", work_id=work_id, saga_id="s-1") == "lease-lost"
        uow.session.rollback()
    assert _state(engine, work_id) == (0, False)
    with unit_of_work(engine) as uow:
        assert settle(uow.session, "m-11", "writer", work_id=work_id, saga_id="s-1") == "applied"
    assert _state(engine, work_id) == (1, True)


def test_settle_of_an_applied_message_leaves_other_work_open(url: str) -> None:
    engine = make_engine(url)
    with unit_of_work(engine) as uow:
        assert claim(uow.session, "m-13", "writer")
    work_id = _held_work(engine, "m-13")  # the same id holds other work: settle must not complete it
    with unit_of_work(engine) as uow:
        assert settle(uow.session, "m-13", "writer", work_id=work_id, saga_id="s-1") == "duplicate"
    assert _state(engine, work_id) == (1, False)

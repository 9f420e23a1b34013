"""The inbox claim: one statement that writes the row unless the message was applied already."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, func, select

from orchestrator.store.db import make_engine, unit_of_work
from orchestrator.store.outbox_tables import InboxRow
from outbox.inbox import already_applied, claim


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

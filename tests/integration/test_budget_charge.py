"""A saga's budget charge: one statement that creates the row, adds to it, and refuses
(changing nothing) a charge that would go over the limit, also under concurrent charges."""

from __future__ import annotations

import threading

import pytest

from orchestrator.harness.budget import BudgetExhausted, Charge, Spent
from orchestrator.store.budget import charge, spent
from orchestrator.store.db import make_engine, unit_of_work


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    return sqlite_url if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


def _charge(engine, c: Charge) -> Spent:  # type: ignore[no-untyped-def]
    with unit_of_work(engine) as uow:
        return charge(uow.session, c)


def _spent(engine, saga_id: str) -> Spent:  # type: ignore[no-untyped-def]
    with unit_of_work(engine) as uow:
        return spent(uow.session, saga_id)


def test_the_first_charge_creates_the_row_and_later_ones_add_to_it(url: str) -> None:
    engine = make_engine(url)
    assert _charge(engine, Charge("s-1", limit=0, tokens=10, cost=0.5)) == Spent(1, 10, 0.5)
    assert _charge(engine, Charge("s-1", limit=0, calls=2, tokens=5)) == Spent(3, 15, 0.5)
    assert _charge(engine, Charge("s-2", limit=0)) == Spent(1, 0, 0.0)
    assert _spent(engine, "s-1") == Spent(3, 15, 0.5)


def test_a_charge_over_the_limit_is_refused_and_changes_nothing(url: str) -> None:
    engine = make_engine(url)
    for n in (1, 2, 3):
        assert _charge(engine, Charge("s-1", limit=3)).calls == n
    with pytest.raises(BudgetExhausted, match="3 of 3 tool calls spent"):
        _charge(engine, Charge("s-1", limit=3, tokens=99))
    assert _spent(engine, "s-1") == Spent(3, 0, 0.0)


def test_a_first_charge_bigger_than_the_limit_writes_no_row(url: str) -> None:
    engine = make_engine(url)
    with pytest.raises(BudgetExhausted, match="0 of 2 tool calls spent"):
        _charge(engine, Charge("s-1", limit=2, calls=3))
    assert _spent(engine, "s-1") == Spent()
    assert _charge(engine, Charge("s-1", limit=2, calls=2)).calls == 2


def test_concurrent_charges_never_spend_past_the_limit(pg_url: str) -> None:
    engine = make_engine(pg_url)
    granted: list[int] = []
    refused: list[int] = []
    start = threading.Barrier(8)

    def agent() -> None:
        start.wait()
        for _ in range(5):
            try:
                granted.append(_charge(engine, Charge("s-1", limit=25)).calls)
            except BudgetExhausted:
                refused.append(1)

    threads = [threading.Thread(target=agent) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(granted) == list(range(1, 26)) and len(refused) == 15
    assert _spent(engine, "s-1").calls == 25


def test_a_reads_charge_waits_for_the_saga_like_an_intent_so_the_two_never_deadlock(pg_url: str) -> None:
    """Every writer locks the saga before its budget row. An intent holds the saga and is
    about to charge; a read's result arrives meanwhile with its own charge: it waits for the
    saga (holding nothing), and both commit. Charging first, the two would each hold what
    the other waits for, and PostgreSQL would abort one with `deadlock detected`."""
    from orchestrator.store.events import add_event, hold_chain
    from orchestrator.store.harness_store import SqlHarnessStore
    from orchestrator.store.tables import SagaRow
    from tests.integration.helpers import wait_for_a_lock_wait

    engine = make_engine(pg_url)
    with unit_of_work(engine) as uow:
        saga = SagaRow(brief="b", corpus="c", destinations=["site:/x"], state="preparing", created_by="dana")
        uow.session.add(saga)
        uow.session.flush()
        add_event(uow.session, saga_id=saga.id, actor="dana", kind="saga", status="submitted")
    _charge(engine, Charge(saga.id, limit=0))  # the budget row exists: a charge locks it
    errors: list[BaseException] = []

    def read_result() -> None:
        try:
            SqlHarnessStore(engine).record_event(
                saga_id=saga.id,
                actor="researcher",
                kind="tool_call",
                status="ok",
                tool="corpus.read",
                charge=Charge(saga.id, limit=0),
            )
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read_result)
    with unit_of_work(engine) as intent:
        hold_chain(intent.session, saga.id)  # the intent's first step: the saga's lock
        reader.start()
        wait_for_a_lock_wait(engine, "the read's record to wait")
        charge(intent.session, Charge(saga.id, limit=0))  # then its charge
    reader.join(timeout=30)
    assert errors == []
    assert _spent(engine, saga.id).calls == 3

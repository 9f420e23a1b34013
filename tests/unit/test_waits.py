"""`outbox.waits`: deliveries that wait without a thread each, and the same code on a plain thread.

Thirty deliveries on one loop thread all wait at once on a gate the test opens,
each in a copy of the context it was started from; `start` blocks while the
deliveries running fill the capacity; what a delivery raises is logged; and
`wait` / `pause` called outside a delivery block their caller and return.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextvars import ContextVar

import pytest

from outbox.waits import Waits, pause, wait, waiting_here

WHO: ContextVar[str] = ContextVar("who", default="nobody")


class Gate:
    """A gate the test opens from its own thread; deliveries wait on it on their loop."""

    def __init__(self) -> None:
        self.opened: Future[str] = Future()
        self.waiting = 0
        self._lock = threading.Lock()

    def pass_through(self) -> str:
        with self._lock:
            self.waiting += 1

        async def opened() -> str:
            return await asyncio.wrap_future(self.opened)

        return wait(opened)


def _until(check: Callable[[], bool], what: str) -> None:
    polled = threading.Event()
    for _ in range(500):
        if check():
            return
        polled.wait(0.01)
    raise AssertionError(f"never: {what}")


@pytest.fixture
def gate() -> Iterator[Gate]:
    made = Gate()
    yield made
    if not made.opened.done():
        made.opened.set_result("closing")


def test_many_deliveries_wait_at_once_on_one_thread_each_in_its_context(gate: Gate) -> None:
    waits = Waits(threads=1, capacity=50)
    seen: list[tuple[str, str, bool]] = []
    threads: set[str] = set()

    def delivery() -> None:
        threads.add(threading.current_thread().name)
        said = gate.pass_through()
        seen.append((WHO.get(), said, waiting_here()))

    for n in range(30):
        WHO.set(f"delivery-{n}")
        waits.start(delivery)
    _until(lambda: gate.waiting == 30, "thirty deliveries waiting at once")
    assert waits.running() == 30 and seen == []
    assert len(threads) == 1, threads  # one loop thread held them all
    gate.opened.set_result("open")
    _until(lambda: waits.running() == 0, "every delivery done")
    assert sorted(seen) == sorted((f"delivery-{n}", "open", True) for n in range(30))


def test_start_blocks_while_the_capacity_is_taken(gate: Gate) -> None:
    waits = Waits(threads=1, capacity=2)
    for _ in range(2):
        waits.start(gate.pass_through)
    started = threading.Event()

    def third() -> None:
        waits.start(lambda: None)
        started.set()

    threading.Thread(target=third, daemon=True).start()
    _until(lambda: gate.waiting == 2, "two deliveries waiting")
    assert not started.wait(0.2), "a third delivery started beyond the capacity"
    gate.opened.set_result("open")
    assert started.wait(5)


def test_what_a_delivery_raises_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    waits = Waits(threads=1, capacity=1)

    def broken() -> None:
        raise RuntimeError("the database went away")

    with caplog.at_level(logging.ERROR, logger="outbox.waits"):
        waits.start(broken)
        _until(lambda: waits.running() == 0, "the delivery done")
        _until(lambda: bool(caplog.records), "the failure logged")
    assert "its lease will bring it back" in caplog.text and "the database went away" in caplog.text


def test_wait_and_pause_outside_a_delivery_block_their_caller() -> None:
    async def answer() -> str:
        await asyncio.sleep(0)
        return "answered"

    assert not waiting_here()
    assert wait(answer) == "answered"
    pause(0)

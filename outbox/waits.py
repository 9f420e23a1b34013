"""Deliveries that wait on I/O without holding a thread: `Waits`, and `wait` / `pause` for their code.

A worker hands `Waits.start` a delivery whose turn waits on a model. It runs
as a greenlet on one of a few loop threads, each an asyncio event loop. Where
its code waits (`wait(make)`: the coroutine `make()` returns, a model's
request; `pause(seconds)`: a backoff) the greenlet is suspended and its loop
runs other deliveries; it goes on, on the same loop, once the coroutine ends.
A waiting delivery holds no thread and (its code waits only with no session
open) no database connection: a process holds up to `capacity` of them at
once, and `start` blocks its caller while that many are running.

Code between two waits runs on its loop's thread and holds that loop (a
database round trip, a turn's CPU work): each loop runs one delivery at a
time, `threads` loops side by side.

Called anywhere else (a command's own thread, inline://, a test), `wait`
runs the coroutine on one shared loop thread and blocks its caller until it
ends, and `pause` sleeps: the same code works both ways.

Greenlets come from SQLAlchemy's asyncio bridge (`greenlet_spawn`, `await_`),
which needs the `greenlet` package (the `llm` extra installs it).
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

from sqlalchemy.util.concurrency import await_, greenlet_spawn, in_greenlet

log = logging.getLogger(__name__)
T = TypeVar("T")
# Without it no delivery runs as a greenlet, and `wait` and `pause` block their callers.
GREENLETS = importlib.util.find_spec("greenlet") is not None


class _Loop:
    """One asyncio event loop, run forever on a daemon thread of its own."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, make: Callable[[], Awaitable[T]]) -> Future[T]:
        """Run `make()`'s coroutine on this loop, in a copy of the caller's context."""

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop)


class Waits:
    """Runs deliveries as greenlets on `threads` event loops, at most `capacity` at once."""

    def __init__(self, *, threads: int, capacity: int) -> None:
        if threads < 1 or capacity < 1:
            raise ValueError("Waits needs at least one thread and room for one delivery")
        if not GREENLETS:
            raise ImportError("waiting deliveries need the `greenlet` package (the `llm` extra installs it)")
        self.threads, self.capacity = threads, capacity
        self._room = threading.BoundedSemaphore(capacity)
        self._lock = threading.Lock()
        self._loops: list[_Loop] = []
        self._turn = itertools.count()
        self._running = 0

    def start(self, delivery: Callable[[], object]) -> None:
        """Run `delivery` on one of the loops, in a copy of this thread's context; blocks while
        `capacity` deliveries are running. What it raises is logged, never re-raised."""
        self._room.acquire()
        with self._lock:
            self._running += 1
            loop = self._loop(next(self._turn) % self.threads)
        done = loop.submit(lambda: greenlet_spawn(delivery))
        done.add_done_callback(self._ended)

    def running(self) -> int:
        """The deliveries started and not ended yet (waiting or running)."""
        with self._lock:
            return self._running

    def _loop(self, n: int) -> _Loop:
        while len(self._loops) <= n:
            self._loops.append(_Loop(f"pressroom-waits-{len(self._loops)}"))
        return self._loops[n]

    def _ended(self, done: Future[object]) -> None:
        with self._lock:
            self._running -= 1
        self._room.release()
        if not done.cancelled() and (exc := done.exception()) is not None:
            log.error("a waiting delivery failed; its lease will bring it back", exc_info=exc)


_shared: _Loop | None = None
_shared_lock = threading.Lock()


def _shared_loop() -> _Loop:
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = _Loop("pressroom-waits-shared")
        return _shared


def _forget_loops() -> None:
    # A forked child has none of its parent's threads: its first `wait` starts a loop of its own.
    global _shared
    _shared = None


os.register_at_fork(after_in_child=_forget_loops)


def waiting_here() -> bool:
    """Whether this code runs as a delivery of `Waits` (a wait gives its thread back)."""
    return GREENLETS and in_greenlet()


def wait(make: Callable[[], Awaitable[T]]) -> T:
    """The result of `make()`'s coroutine: awaited on this delivery's loop when it runs as one
    (the delivery is suspended meanwhile), else on the shared loop with this thread blocked."""
    if waiting_here():
        return await_(make())
    return _shared_loop().submit(make).result()


def pause(seconds: float) -> None:
    """Wait `seconds`: suspended when running as a delivery of `Waits`, else asleep."""
    if waiting_here():
        await_(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


__all__ = ["GREENLETS", "Waits", "pause", "wait", "waiting_here"]

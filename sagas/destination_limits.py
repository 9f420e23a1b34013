"""At most a limit of publish calls in flight to one destination in this process.

A saga whose every destination is at its limit does not wait on a thread: its
delivery ends parked and `DestinationLimits.when_free` sends it again when a
call to one of its destinations ends (`sagas.runner` takes and gives back turns).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


class DestinationLimits:
    """At most `limit` calls in flight to one destination in this process.

    A call never waits for its turn: `take` says no when the destination is at
    its limit, and the saga's delivery ends parked (`Parked`) instead of holding
    a worker's thread. `when_free` then runs a wake-up (the work sent again) as
    soon as a call to one of its destinations ends, or at once if one already
    has: a turn freed between the refusal and the request is not missed.
    Wake-ups run in the order they were asked for, each once, and the turn that
    woke one is held for it (`take` with its `key`) for `hold_seconds`, so a
    publish arriving meanwhile does not overtake a saga that waited. A turn
    held for a saga that does not come for it in time (its resend went to
    another process, or its round published elsewhere) passes to the next.
    """

    def __init__(self, limit: int, *, hold_seconds: float = 5.0) -> None:
        self.limit = max(1, limit)
        self.hold_seconds = hold_seconds
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = defaultdict(int)  # calls, and turns held for a woken saga
        self._waiting: dict[str, deque[_Wake]] = defaultdict(deque)
        self._held: dict[tuple[str, str], threading.Timer] = {}

    def take(self, uri: str, key: str = "") -> bool:
        """A turn at `uri`, if one is free or held for `key`; whoever takes one gives it back."""
        with self._lock:
            timer = self._held.pop((uri, key), None) if key else None
            if timer is not None:
                timer.cancel()
                return True
            if self._in_flight[uri] >= self.limit:
                return False
            self._in_flight[uri] += 1
            return True

    def give_back(self, uri: str) -> None:
        """End a call to `uri`: its turn goes to the first saga waiting for it, if any."""
        with self._lock:
            wake = self._pass_on(uri)
        if wake is not None:
            _run(wake)

    def when_free(self, uris: tuple[str, ...], wake: Callable[[], None], key: str = "") -> None:
        """Run `wake` once, when a turn at any of `uris` is free (now, if one is);
        the turn is then held for `key`."""
        waiting = _Wake(wake, key)
        with self._lock:
            free = next((uri for uri in uris if self._in_flight[uri] < self.limit), None)
            if free is not None:
                waiting.fired = True
                self._in_flight[free] += 1
                self._hold(free, waiting)
            else:
                for uri in uris:
                    self._waiting[uri].append(waiting)
        if free is not None:
            _run(waiting)

    def waiting(self, uri: str) -> int:
        """How many parked sagas wait for a turn at `uri` in this process."""
        with self._lock:
            return sum(not w.fired for w in self._waiting.get(uri, ()))

    def wake_all(self) -> int:
        """Run every wake-up still waiting (a worker shutting down hands its parked work on)."""
        with self._lock:
            every = {id(w): w for queue in self._waiting.values() for w in queue if not w.fired}
            self._waiting.clear()
            for w in every.values():
                w.fired = True
        for w in every.values():
            _run(w)
        return len(every)

    def _pass_on(self, uri: str) -> _Wake | None:
        """Under the lock: a turn at `uri` ends; hold it for the next saga waiting, else free it."""
        queue = self._waiting.get(uri)
        while queue:
            waiting = queue.popleft()
            if not waiting.fired:  # one wake-up may wait on several destinations
                waiting.fired = True
                self._hold(uri, waiting)
                return waiting
        self._in_flight[uri] -= 1
        return None

    def _hold(self, uri: str, waiting: _Wake) -> None:
        if not waiting.key:
            self._in_flight[uri] -= 1  # nobody to hold it for: free
            return
        timer = threading.Timer(self.hold_seconds, self._expire, (uri, waiting.key))
        timer.daemon = True
        old = self._held.pop((uri, waiting.key), None)
        if old is not None:  # the same work woken twice: it keeps one turn
            old.cancel()
            self._in_flight[uri] -= 1
        self._held[(uri, waiting.key)] = timer
        timer.start()

    def _expire(self, uri: str, key: str) -> None:
        with self._lock:
            if self._held.pop((uri, key), None) is None:
                return  # taken meanwhile
            wake = self._pass_on(uri)
        if wake is not None:
            _run(wake)


@dataclass
class _Wake:
    run: Callable[[], None]
    key: str = ""
    fired: bool = False


def _run(wake: _Wake) -> None:
    """Run a wake-up in a context of its own: not in the trace, nor as the person, of
    the call that ended. One that fails is logged, never raised into that call: the
    parked work's lease runs out and the sweeper sends it."""
    try:
        contextvars.Context().run(wake.run)
    except Exception:
        log.exception("a parked saga's wake-up failed; the sweeper sends its work when the lease runs out")


__all__ = ["DestinationLimits"]

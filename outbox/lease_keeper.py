"""Keeping the leases of work that waits on a model alive: `LeaseKeeper`.

A model call may take longer than a lease (a slow model, its timeout, its
retries), and a turn makes several. While a delivery of such work is in
`held(work_id, holder)`, one thread of this process renews its lease every
`interval` seconds (a third of the lease), each renewal a short transaction
of its own; the thread ends when nothing is held. A process that dies
renews nothing: its leases run out and the sweeper sends the work again. A
renewal that finds the lease no longer ours (the sweeper resent the work
after this process stalled for a whole lease) stops renewing it, and the
turn's final transaction then finds the lease lost and writes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

# `(work_id, holder)`: push that lease out again; False when it is not the holder's any more.
Renew = Callable[[str, str], bool]
Held = tuple[str, str]


class LeaseKeeper:
    """Renews the leases held in `held(...)` every `interval` seconds, from one thread."""

    def __init__(self, renew: Renew, interval: float) -> None:
        if interval <= 0:
            raise ValueError("a lease keeper's interval must be positive")
        self.renew = renew
        self.interval = interval
        self._lock = threading.Lock()
        self._held: Counter[Held] = Counter()
        self._lost: set[Held] = set()
        self._thread: threading.Thread | None = None

    @contextmanager
    def held(self, work_id: str, holder: str) -> Iterator[None]:
        """Keep `holder`'s lease on `work_id` alive until the block ends."""
        key = (work_id, holder)
        with self._lock:
            self._held[key] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="pressroom-lease-keeper", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._held[key] -= 1
                if self._held[key] <= 0:
                    del self._held[key]
                    self._lost.discard(key)

    def holding(self) -> list[Held]:
        """The leases being kept now (the lost ones left out)."""
        with self._lock:
            return [key for key in self._held if key not in self._lost]

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                if not self._held:
                    self._thread = None
                    return
            for work_id, holder in self.holding():
                self._renew(work_id, holder)

    def _renew(self, work_id: str, holder: str) -> None:
        try:
            kept = self.renew(work_id, holder)
        except Exception:  # the database is away: the next round tries again, the lease may run out
            log.warning("could not renew the lease of work %s", work_id, exc_info=True)
            return
        if not kept:
            log.warning("work %s is no longer held by %s: its lease is not renewed", work_id, holder)
            with self._lock:
                if (work_id, holder) in self._held:
                    self._lost.add((work_id, holder))


__all__ = ["LeaseKeeper", "Renew"]

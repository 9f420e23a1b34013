"""Time, passed in: services, the runner and the policy ask a `Clock`, never the wall clock.

Every time one process writes and another compares (a lease, an approval's expiry, when a
saga became ready for review, an outbox row's age) is read on one clock, the database's,
so that a host whose clock is minutes off decides nothing differently:

- `AnchoredClock` is the database's time on this host: a reading of the server's clock,
  taken again every `every` seconds, advanced in between by this host's monotonic clock
  (never by its wall clock). Its arithmetic is here and pure; the reading is a function it
  is handed (`orchestrator.store.db_clock` asks the database).
- `DATABASE_TIME` is that clock for this process: the composition root installs the one of
  its database (`DatabaseTime.use`); until then, and for a database on this host (SQLite),
  it is the system clock. The stores' `utcnow()` reads it.
- `SystemClock` is the one reader of the host's wall clock; tests hand in a `ManualClock`
  and move it instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

# Seconds between two readings of the database's clock, and after a reading that failed.
RESAMPLE_EVERY = 30.0
RETRY_AFTER = 5.0


class Clock(Protocol):
    def now(self) -> datetime:
        """The current moment, timezone-aware (UTC)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, by: timedelta | float) -> datetime:
        self._now += by if isinstance(by, timedelta) else timedelta(seconds=by)
        return self._now


SYSTEM_CLOCK: Clock = SystemClock()


@dataclass(frozen=True)
class Anchor:
    """The database's clock read `at` that moment, when this host's monotonic clock said `mono`."""

    at: datetime
    mono: float


def anchor_between(before: float, reading: datetime, after: float) -> Anchor:
    """A reading taken between the monotonic moments `before` and `after`, dated halfway:
    it is off by at most half the round trip."""
    return Anchor(reading.astimezone(UTC), before + (after - before) / 2)


def anchored_now(anchor: Anchor, mono: float) -> datetime:
    """The database's time at the monotonic moment `mono`, from `anchor`."""
    return anchor.at + timedelta(seconds=mono - anchor.mono)


class AnchoredClock:
    """The database's time: `read()` gives the server's clock (None when it cannot be asked),
    read at the first `now()` and again once `every` seconds have passed (after a failure,
    `retry` seconds); in between it advances by `monotonic`. Until a reading succeeds it is
    `fallback`. One thread reads at a time; the others go on from the reading they have."""

    def __init__(
        self,
        read: Callable[[], datetime | None],
        *,
        every: float = RESAMPLE_EVERY,
        retry: float = RETRY_AFTER,
        monotonic: Callable[[], float] = time.monotonic,
        fallback: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._read = read
        self._every = every
        self._retry = retry
        self._monotonic = monotonic
        self._fallback = fallback
        self._anchor: Anchor | None = None
        self._due = float("-inf")
        self._lock = threading.Lock()

    @property
    def anchor(self) -> Anchor | None:
        return self._anchor

    def now(self) -> datetime:
        if self._monotonic() >= self._due:
            self._resample()
        anchor = self._anchor
        return self._fallback.now() if anchor is None else anchored_now(anchor, self._monotonic())

    def _resample(self) -> None:
        # With a reading in hand, a thread never waits for another's: it goes on with that one.
        if not self._lock.acquire(blocking=self._anchor is None):
            return
        try:
            if self._monotonic() < self._due:
                return  # read meanwhile by the thread this one waited for
            before = self._monotonic()
            reading = self._read()
            after = self._monotonic()
            if reading is None:
                self._due = after + self._retry
                return
            self._anchor = anchor_between(before, reading, after)
            self._due = after + self._every
        finally:
            self._lock.release()

    def forked(self) -> None:
        """In a forked child: a lock held by a parent's thread at the fork is never let go."""
        self._lock = threading.Lock()


class DatabaseTime:
    """The database's time as this process reads it: the clock the composition root chose for
    its database (`use`), the system clock until then."""

    def __init__(self) -> None:
        self._clock: Clock = SYSTEM_CLOCK

    @property
    def clock(self) -> Clock:
        return self._clock

    def use(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> datetime:
        return self._clock.now()


DATABASE_TIME = DatabaseTime()


def iso(moment: datetime | None) -> str | None:
    """A moment as ISO 8601 in UTC with a `Z`; naive moments are taken as UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


__all__ = [
    "DATABASE_TIME",
    "RESAMPLE_EVERY",
    "RETRY_AFTER",
    "SYSTEM_CLOCK",
    "Anchor",
    "AnchoredClock",
    "Clock",
    "DatabaseTime",
    "ManualClock",
    "SystemClock",
    "anchor_between",
    "anchored_now",
    "iso",
]

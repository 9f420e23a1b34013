"""Time, passed in: services, the runner and the policy ask a `Clock`, never the wall clock.

`SystemClock` is the one reader of the real time; tests hand in a `ManualClock` and move it
instead of sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


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


def iso(moment: datetime | None) -> str | None:
    """A moment as ISO 8601 in UTC with a `Z`; naive moments are taken as UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock", "iso"]

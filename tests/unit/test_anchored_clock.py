"""The database's clock on this host (`orchestrator.core.clock.AnchoredClock`): read from the
server, advanced by the monotonic clock in between, read again every so often; no services."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from orchestrator.core.clock import (
    DATABASE_TIME,
    SYSTEM_CLOCK,
    Anchor,
    AnchoredClock,
    DatabaseTime,
    ManualClock,
    anchor_between,
    anchored_now,
)

SERVER = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Mono:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.value = 1000.0

    def __call__(self) -> float:
        return self.value


class Server:
    """The database's clock: `at` the server's time; each read moves `mono` by `trip` seconds."""

    def __init__(self, mono: Mono, trip: float = 0.0) -> None:
        self.mono = mono
        self.trip = trip
        self.at: datetime | None = SERVER
        self.reads = 0

    def __call__(self) -> datetime | None:
        self.reads += 1
        self.mono.value += self.trip / 2
        at = self.at
        self.mono.value += self.trip / 2
        if at is not None:
            self.at = at + timedelta(seconds=self.trip)
        return at


def test_a_reading_is_dated_halfway_through_its_round_trip() -> None:
    anchor = anchor_between(10.0, SERVER, 10.4)
    assert anchor == Anchor(SERVER, 10.2)
    assert anchored_now(anchor, 12.2) == SERVER + timedelta(seconds=2)


def test_a_reading_in_another_zone_is_kept_in_utc() -> None:
    from zoneinfo import ZoneInfo

    at = SERVER.astimezone(ZoneInfo("Europe/Paris"))
    assert anchor_between(0.0, at, 0.0).at.tzinfo is UTC
    assert anchor_between(0.0, at, 0.0).at == SERVER


def test_between_readings_it_advances_by_the_monotonic_clock_not_the_wall_clock() -> None:
    mono = Mono()
    server = Server(mono)
    wall = ManualClock(SERVER + timedelta(minutes=10))  # the host's wall clock, ten minutes ahead
    clock = AnchoredClock(server, every=30, monotonic=mono, fallback=wall)
    assert clock.now() == SERVER
    mono.value += 7.5
    wall.advance(3600)
    assert clock.now() == SERVER + timedelta(seconds=7.5)
    assert server.reads == 1


def test_it_reads_the_server_again_once_every_seconds_have_passed() -> None:
    mono = Mono()
    server = Server(mono)
    clock = AnchoredClock(server, every=30, monotonic=mono)
    clock.now()
    mono.value += 29.9
    clock.now()
    assert server.reads == 1
    server.at = SERVER + timedelta(seconds=45)  # the server's clock was stepped meanwhile
    mono.value += 0.1
    assert clock.now() == SERVER + timedelta(seconds=45)
    assert server.reads == 2


def test_the_round_trip_halves_the_error() -> None:
    mono = Mono()
    server = Server(mono, trip=0.2)
    clock = AnchoredClock(server, monotonic=mono)
    # Read at 1000.1 (halfway through a 0.2 s trip); `now` is asked at 1000.2.
    assert clock.now() == SERVER + timedelta(seconds=0.1)


def test_until_a_reading_succeeds_it_is_the_fallback_and_it_tries_again_later() -> None:
    mono = Mono()
    server = Server(mono)
    server.at = None
    wall = ManualClock(SERVER - timedelta(minutes=10))
    clock = AnchoredClock(server, every=30, retry=5, monotonic=mono, fallback=wall)
    assert clock.now() == wall.now()
    mono.value += 4
    assert clock.now() == wall.now() and server.reads == 1, "not asked again before `retry` seconds"
    server.at = SERVER
    mono.value += 1
    assert clock.now() == SERVER and server.reads == 2


def test_a_failed_reading_keeps_the_last_one() -> None:
    mono = Mono()
    server = Server(mono)
    clock = AnchoredClock(server, every=30, retry=5, monotonic=mono, fallback=ManualClock())
    clock.now()
    server.at = None
    mono.value += 31
    assert clock.now() == SERVER + timedelta(seconds=31)
    assert server.reads == 2
    mono.value += 4
    clock.now()
    assert server.reads == 2, "a failed reading is retried `retry` seconds later"
    mono.value += 1
    clock.now()
    assert server.reads == 3


def test_with_a_reading_in_hand_no_thread_waits_for_another_reading() -> None:
    mono = Mono()
    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow_read() -> datetime:
        calls.append(1)
        if len(calls) == 2:
            entered.set()
            release.wait(10)
        return SERVER

    clock = AnchoredClock(slow_read, every=30, monotonic=mono)
    clock.now()
    mono.value += 31
    reader = threading.Thread(target=clock.now)
    reader.start()
    try:
        assert entered.wait(10)
        assert clock.now() == SERVER + timedelta(seconds=31), "went on from the reading it had"
        assert len(calls) == 2, "one thread reads at a time"
    finally:
        release.set()
        reader.join(10)


def test_the_process_database_time_is_the_system_clock_until_one_is_installed() -> None:
    time = DatabaseTime()
    assert time.clock is SYSTEM_CLOCK
    manual = ManualClock(SERVER)
    time.use(manual)
    assert time.now() == SERVER
    assert DATABASE_TIME.clock is not manual

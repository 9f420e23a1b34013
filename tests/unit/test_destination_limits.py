"""The per-destination turns of a publisher process, without services.

A call takes a turn or is told no at once; a parked saga's wake-up runs once,
in the order asked, when a turn frees (or at once when one is free already);
no wake-up is lost to a turn freed between the refusal and the request.
"""

from __future__ import annotations

import contextvars
import logging
import random
import threading

import pytest

from sagas.destination_limits import DestinationLimits

HOOK = "webhook:http://one"
OTHER = "webhook:http://two"


def test_a_turn_is_taken_up_to_the_limit_and_given_back() -> None:
    limits = DestinationLimits(2)
    assert limits.take(HOOK) and limits.take(HOOK)
    assert not limits.take(HOOK), "the limit is reached"
    assert limits.take(OTHER), "each destination has its own turns"
    limits.give_back(HOOK)
    assert limits.take(HOOK)


def test_a_limit_below_one_is_one() -> None:
    limits = DestinationLimits(0)
    assert limits.take(HOOK) and not limits.take(HOOK)


def test_a_wake_up_runs_at_once_when_a_turn_is_free() -> None:
    limits = DestinationLimits(1)
    woken: list[str] = []
    limits.when_free((HOOK,), lambda: woken.append("now"))
    assert woken == ["now"] and limits.waiting(HOOK) == 0


def test_wake_ups_run_in_order_one_per_turn_freed() -> None:
    limits = DestinationLimits(1)
    assert limits.take(HOOK)
    woken: list[int] = []
    for n in range(3):
        limits.when_free((HOOK,), lambda n=n: woken.append(n), key=f"work-{n}")  # type: ignore[misc]
    assert woken == [] and limits.waiting(HOOK) == 3
    limits.give_back(HOOK)
    assert woken == [0]
    assert not limits.take(HOOK), "the freed turn is held for the saga it woke: a newcomer does not overtake"
    assert not limits.take(HOOK, "work-1"), "nor does a saga further back"
    assert limits.take(HOOK, "work-0")
    limits.give_back(HOOK)
    assert woken == [0, 1] and limits.waiting(HOOK) == 1


def test_a_turn_nobody_holds_a_key_for_is_free_to_all() -> None:
    limits = DestinationLimits(1)
    assert limits.take(HOOK)
    woken: list[str] = []
    limits.when_free((HOOK,), lambda: woken.append("keyless"))
    limits.give_back(HOOK)
    assert woken == ["keyless"] and limits.take(HOOK)


def test_a_held_turn_nobody_comes_for_passes_to_the_next_saga_waiting() -> None:
    limits = DestinationLimits(1, hold_seconds=0.05)
    assert limits.take(HOOK)
    second = threading.Event()
    limits.when_free((HOOK,), lambda: None, key="went-elsewhere")
    limits.when_free((HOOK,), second.set, key="next")
    limits.give_back(HOOK)  # held for "went-elsewhere", which never takes it
    assert second.wait(30), "the turn passed on when its hold ran out"
    assert not limits.take(HOOK, "went-elsewhere"), "too late: the turn is held for the next one now"
    assert limits.take(HOOK, "next")


def test_a_held_turn_runs_out_to_free_when_nobody_else_waits() -> None:
    limits = DestinationLimits(1, hold_seconds=0.05)
    limits.when_free((HOOK,), lambda: None, key="went-elsewhere")  # free: held at once
    assert not limits.take(HOOK)
    pause = threading.Event()
    for _ in range(3000):
        if limits.take(HOOK):
            break
        pause.wait(0.01)
    else:
        raise AssertionError("the held turn never ran out")


def test_a_wake_up_waiting_on_two_destinations_runs_once() -> None:
    limits = DestinationLimits(1)
    assert limits.take(HOOK) and limits.take(OTHER)
    woken: list[str] = []
    limits.when_free((HOOK, OTHER), lambda: woken.append("both"))
    limits.when_free((OTHER,), lambda: woken.append("other"))
    limits.give_back(HOOK)
    assert woken == ["both"]
    limits.give_back(OTHER)
    assert woken == ["both", "other"], "the turn at OTHER went to the next waiting, not to a spent one"


def test_wake_all_hands_every_parked_saga_on_once() -> None:
    limits = DestinationLimits(1)
    assert limits.take(HOOK) and limits.take(OTHER)
    woken: list[str] = []
    limits.when_free((HOOK, OTHER), lambda: woken.append("a"))
    limits.when_free((OTHER,), lambda: woken.append("b"))
    assert limits.wake_all() == 2
    assert sorted(woken) == ["a", "b"]
    limits.give_back(HOOK)
    limits.give_back(OTHER)
    assert sorted(woken) == ["a", "b"], "nothing runs twice"


def test_a_failing_wake_up_is_logged_not_raised_into_the_call_that_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limits = DestinationLimits(1)
    assert limits.take(HOOK)

    def broken() -> None:
        raise RuntimeError("database gone")

    limits.when_free((HOOK,), broken)
    with caplog.at_level(logging.ERROR, logger="sagas.runner"):
        limits.give_back(HOOK)
    assert "sweeper" in caplog.text
    assert limits.take(HOOK), "the turn was given back all the same"


def test_never_more_than_the_limit_and_no_wake_up_lost_under_threads() -> None:
    """Threads publish to one destination, parking when told no; each parked one
    tries again when woken. Every one of them gets its call in the end."""
    limits = DestinationLimits(2)
    lock = threading.Lock()
    inside, peak, done = [0], [0], [0]
    calls = 200
    finished = threading.Event()

    def attempt(key: str) -> None:
        if not limits.take(HOOK, key):
            woken = threading.Thread(target=attempt, args=(key,))
            limits.when_free((HOOK,), woken.start, key=key)
            return
        try:
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            threading.Event().wait(random.random() / 1000)
            with lock:
                inside[0] -= 1
                done[0] += 1
                if done[0] == calls:
                    finished.set()
        finally:
            limits.give_back(HOOK)

    starters = [threading.Thread(target=attempt, args=(f"work-{n}",)) for n in range(calls)]
    for t in starters:
        t.start()
    assert finished.wait(60), f"only {done[0]} of {calls} calls ran: a wake-up was lost"
    assert peak[0] == 2, "never more than the limit, and the limit is reached"
    assert limits.waiting(HOOK) == 0


def test_a_wake_up_runs_outside_the_context_of_the_call_that_ended() -> None:
    trace_of_the_call: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="none")
    limits = DestinationLimits(1)
    assert limits.take(HOOK)
    seen: list[str] = []
    limits.when_free((HOOK,), lambda: seen.append(trace_of_the_call.get()))
    trace_of_the_call.set("saga-a")
    limits.give_back(HOOK)
    assert seen == ["none"], "the woken saga's resend does not join the ending call's trace"

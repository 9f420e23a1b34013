"""How many calls one model profile may have in flight and per minute in this process.

`ModelLimits` is keyed by a profile's identity (its `base_url` and `model`): two
pipelines naming the same endpoint and model share one set of limits. For each
profile it bounds

* the calls in flight (`concurrency`);
* the calls started in the last minute (`requests_per_minute`, None: unlimited);
* the tokens of the calls started in the last minute (`tokens_per_minute`, None:
  unlimited), each counted at its estimate when it starts and at what it used
  once it ends;
* nothing at all while the profile cools down after a 429: for the seconds the
  server asked, or a bounded exponential backoff when it asked none.

A call never waits here: `take` answers at once, None when the call may go, or
the seconds to wait before asking again, and the caller gives its thread back
(`roles.durable_model`). A 429 cools down its own profile only. The clock is
injected; no I/O.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from orchestrator.core.pipeline import ModelProfile
from orchestrator.harness.model_calls import backoff

WINDOW: Final = 60.0  # seconds: the per-minute limits count what started in this window
BUSY_WAIT: Final = 1.0  # seconds to wait when every call in flight is still running

Key = tuple[str, str]


def key_of(profile: ModelProfile) -> Key:
    """A profile's identity for its limits: its endpoint and model."""
    return (profile.base_url or "", profile.model)


def token_estimate(profile: ModelProfile, prompt_chars: int) -> int:
    """A call's tokens before it is made: the answer's ceiling and the prompt at ~4 characters a token."""
    return profile.max_tokens + max(0, prompt_chars) // 4


@dataclass
class _Started:
    at: float
    tokens: int


@dataclass
class _Profile:
    in_flight: int = 0
    started: deque[_Started] = field(default_factory=deque)  # calls started in the window
    pending: deque[_Started] = field(default_factory=deque)  # those still in flight, oldest first
    cool_until: float = float("-inf")
    strikes: int = 0  # 429s in a row without a Retry-After

    def forget_before(self, moment: float) -> None:
        while self.started and self.started[0].at <= moment:
            self.started.popleft()


class ModelLimits:
    """Per-profile concurrency, requests and tokens per minute, and cool-downs after a 429."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._profiles: dict[Key, _Profile] = {}

    def take(self, profile: ModelProfile, tokens_estimate: int) -> float | None:
        """None: the call may go now (and holds a place until `release`); otherwise the
        seconds to wait before asking again (nothing is held)."""
        with self._lock:
            now = self.clock()
            state = self._profiles.setdefault(key_of(profile), _Profile())
            state.forget_before(now - WINDOW)
            wait = _wait(profile, state, now, tokens_estimate)
            if wait is not None:
                return max(wait, 0.001)
            entry = _Started(now, max(0, tokens_estimate))
            state.in_flight += 1
            state.started.append(entry)
            state.pending.append(entry)
            return None

    def release(self, profile: ModelProfile, used_tokens: int | None) -> None:
        """A call taken with `take` ends: its place is free, and its tokens counted as it used
        them (`used_tokens`; None: no answer, its estimate stands). An answer ends the
        profile's run of 429s."""
        with self._lock:
            state = self._profiles.get(key_of(profile))
            if state is None or state.in_flight == 0:
                return
            state.in_flight -= 1
            entry = state.pending.popleft() if state.pending else None
            if used_tokens is not None:
                state.strikes = 0
                if entry is not None:
                    entry.tokens = max(0, used_tokens)

    def cool_down(self, profile: ModelProfile, seconds: float | None) -> float:
        """No call to `profile` starts for `seconds` (the server's Retry-After; None: a backoff
        that doubles with each 429 in a row, bounded). The seconds it cools down for."""
        with self._lock:
            state = self._profiles.setdefault(key_of(profile), _Profile())
            if seconds is None:
                state.strikes += 1
                seconds = backoff(state.strikes, None)
            state.cool_until = max(state.cool_until, self.clock() + max(0.0, seconds))
            return seconds

    def in_flight(self, profile: ModelProfile) -> int:
        """The calls to `profile` taken and not yet released."""
        with self._lock:
            state = self._profiles.get(key_of(profile))
            return 0 if state is None else state.in_flight


def _wait(profile: ModelProfile, state: _Profile, now: float, tokens_estimate: int) -> float | None:
    """The seconds until a call may start, None if it may now."""
    if state.cool_until > now:
        return state.cool_until - now
    if state.in_flight >= profile.concurrency:
        return BUSY_WAIT
    rpm = profile.requests_per_minute
    if rpm is not None and len(state.started) >= rpm:
        return state.started[len(state.started) - rpm].at + WINDOW - now
    tpm = profile.tokens_per_minute
    if tpm is None:
        return None
    used = sum(s.tokens for s in state.started)
    if used + tokens_estimate <= tpm or used == 0:  # a call larger than the limit goes alone
        return None
    for entry in state.started:  # oldest first: when enough of them leave the window
        used -= entry.tokens
        if used + tokens_estimate <= tpm or used == 0:
            return entry.at + WINDOW - now
    return None  # not reached: the last entry leaving makes `used` 0


__all__ = ["BUSY_WAIT", "WINDOW", "ModelLimits", "key_of", "token_estimate"]

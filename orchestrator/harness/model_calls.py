"""The rules of a durable, budgeted model call. No I/O.

A model call is an activity, not a transaction: its intent is recorded and
committed, the model is asked with no transaction open, and its reply is
recorded under a key derived from (saga, role, round, request digest). The
same request in the same turn finds its reply recorded and is never sent
again; a different request is a new call.

Here: the request's digest and the call's key, what a reply costs, what a
saga or a role has spent (`Usage`), whether that is over a `Budget` (the
reason line starts `budget exhausted: `), how long to wait before trying an
unavailable endpoint again, and the port the store implements
(`ModelCallLog`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from orchestrator.core.pipeline import Budget
from orchestrator.harness.digests import canonical_json, sha256_hex

CallState = Literal["intent", "answered", "failed"]
PER_MILLION: Final = 1_000_000
BACKOFF_BASE: Final = 0.5  # seconds before the first retry, at most (full jitter)
BACKOFF_CAP: Final = 30.0  # no wait between two attempts is longer than this


def request_digest(
    model: str,
    params: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
) -> str:
    """sha256 of the request's canonical JSON: what was asked, of which model, how."""
    body = {"model": model, "params": dict(params), "messages": list(messages), "tools": list(tools)}
    return sha256_hex(canonical_json(body))


def call_key(saga_id: str, role: str, round: int, digest: str) -> str:
    """The call's business key: the same request in the same turn of a role is the same call."""
    return sha256_hex(canonical_json(["model_call", saga_id, role, round, digest]))


class Prices(Protocol):
    """USD per million tokens (a `ModelProfile` is one)."""

    @property
    def price_in(self) -> float: ...

    @property
    def price_out(self) -> float: ...


def cost_usd(profile_prices: Prices, tokens_in: int, tokens_out: int) -> float:
    """What a reply cost, in USD: its tokens at the profile's prices per million."""
    return (tokens_in * profile_prices.price_in + tokens_out * profile_prices.price_out) / PER_MILLION


@dataclass(frozen=True)
class Usage:
    """Model use so far: answered calls, their tokens and their cost."""

    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.model_calls + other.model_calls,
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cost_usd + other.cost_usd,
        )

    @classmethod
    def of(cls, totals: Mapping[str, Any] | None) -> Usage:
        """From the store's totals (`model_calls`, `tokens_in`, `tokens_out`, `cost_usd`)."""
        if not totals:
            return cls()
        return cls(
            int(totals.get("model_calls", 0)),
            int(totals.get("tokens_in", 0)),
            int(totals.get("tokens_out", 0)),
            float(totals.get("cost_usd", 0.0)),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "model_calls": self.model_calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
        }


def over_budget(spent: Usage, budget: Budget | None, who: str) -> str | None:
    """The reason no further call may be made, or None while `spent` is within `budget`.

    A budget is spent once its ceiling is reached: the call that crosses it was
    already made (and is recorded); the next one is refused. `who` names the
    spender in the reason ("role draft", "saga 1f3c…").
    """
    if budget is None:
        return None
    if budget.tokens is not None and spent.tokens >= budget.tokens:
        return f"budget exhausted: {spent.tokens:,} of {budget.tokens:,} tokens spent by {who}"
    if budget.cost_usd is not None and spent.cost_usd >= budget.cost_usd:
        return f"budget exhausted: {spent.cost_usd:,.6f} of {budget.cost_usd:,.6f} USD spent by {who}"
    return None


def backoff(
    attempt: int,
    retry_after: float | None,
    *,
    rng: random.Random | None = None,
    base: float = BACKOFF_BASE,
    cap: float = BACKOFF_CAP,
) -> float:
    """Seconds to wait before retry number `attempt` (1 for the first retry).

    Exponential with full jitter (a draw in [0, base·2^(attempt-1)] from `rng`;
    without one, the top of that range: deterministic), never less than what
    the server asked for in `retry_after`, and never more than `cap`.
    """
    ceiling = min(cap, base * 2 ** max(0, attempt - 1))
    wait = rng.uniform(0.0, ceiling) if rng is not None else ceiling
    if retry_after is not None:
        wait = max(wait, retry_after)
    return min(cap, max(0.0, wait))


@dataclass(frozen=True)
class CallIntent:
    """What is about to be asked, recorded (and committed) before the request is sent."""

    key: str
    saga_id: str
    role: str
    round: int
    request_id: str | None
    profile: str
    model: str
    params: dict[str, Any]
    request_digest: str


@dataclass(frozen=True)
class CallAnswer:
    """What came back: the reply as JSON (`text`, `tool_calls`, `finish_reason`, `model`), its
    usage and cost, how long the answering request took and how many requests it took."""

    reply: dict[str, Any]
    call_id: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_ms: int
    attempts: int


@dataclass(frozen=True)
class CallRecord:
    """A recorded call as the store holds it."""

    key: str
    state: CallState
    reply: dict[str, Any] | None = None
    attempts: int = 0
    error: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None


class ModelCallLog(Protocol):
    """The store's side of a durable model call; each method is one short transaction."""

    def recorded(self, key: str) -> CallRecord | None: ...

    def record_intent(self, intent: CallIntent) -> CallRecord: ...

    def record_reply(self, intent: CallIntent, answer: CallAnswer) -> CallRecord: ...

    def record_failure(self, key: str, error: str, attempts: int) -> None: ...

    def usage(self, saga_id: str) -> dict[str, Any]: ...


__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "CallAnswer",
    "CallIntent",
    "CallRecord",
    "CallState",
    "ModelCallLog",
    "Prices",
    "Usage",
    "backoff",
    "call_key",
    "cost_usd",
    "over_budget",
    "request_digest",
]

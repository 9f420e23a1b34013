"""Durable per-saga budgets: what one call charges, and when a saga is spent. No I/O.

A saga's agents (role turns, the publisher) spend one budget of tool calls,
kept in the store and charged in the same transaction as the call's intent
(a read-only call: with its result), so a turn re-run after a crash continues
the count instead of starting again. Model tokens and cost are charged with
the call they proposed. A person's command is never charged.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core.errors import Refused


@dataclass(frozen=True)
class Charge:
    saga_id: str
    limit: int  # tool calls the saga may make in all; 0: unlimited
    calls: int = 1
    tokens: int = 0
    cost: float = 0.0


@dataclass(frozen=True)
class Spent:
    """What a saga has spent so far."""

    calls: int = 0
    tokens: int = 0
    cost: float = 0.0


class BudgetExhausted(Refused):
    """The saga's tool-call budget is spent: the call was not made (or its answer withheld)."""


def over(spent: Spent, charge: Charge) -> bool:
    """Whether `charge` on top of `spent` goes over the limit."""
    return charge.limit > 0 and spent.calls + charge.calls > charge.limit


def exhausted(charge: Charge, spent: Spent) -> BudgetExhausted:
    return BudgetExhausted(
        f"budget exhausted: {spent.calls} of {charge.limit} tool calls spent for saga {charge.saga_id}",
        saga_id=charge.saga_id,
    )


__all__ = ["BudgetExhausted", "Charge", "Spent", "exhausted", "over"]

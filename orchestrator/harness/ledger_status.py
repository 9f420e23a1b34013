"""The idempotency ledger's statuses. No I/O.

`pending` (the intent is committed, the call may be running), `done` (the
receipt is recorded; a replay answers from it), `uncertain` (maybe applied;
only a person's reconcile moves it on), `failed` (definitely not applied),
`absent` (a person found it not applied: the next attempt runs with the same
key).
"""

from __future__ import annotations

from enum import StrEnum


class LedgerStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    UNCERTAIN = "uncertain"
    FAILED = "failed"
    ABSENT = "absent"


# Statuses a new attempt may start from (the rest are settled, or a conflict).
RESTARTABLE: frozenset[LedgerStatus] = frozenset(
    {LedgerStatus.FAILED, LedgerStatus.ABSENT, LedgerStatus.PENDING}
)

__all__ = ["RESTARTABLE", "LedgerStatus"]

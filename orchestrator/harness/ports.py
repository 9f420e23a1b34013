"""Ports the engine talks through: the store and the planner. No I/O here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict

from orchestrator.harness.approvals import ApprovalView
from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.provenance import DataEnvelope
from orchestrator.harness.spec import ToolCall


class LedgerView(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    tool: str
    saga_id: str | None
    args_digest: str
    status: str  # pending | done | uncertain | failed | absent
    result: dict[str, Any] | None = None
    attempts: int = 1
    # While a call holds the key (`pending`), until when its claim lasts: a
    # second caller before then is refused as in flight, never run again.
    claimed_until: datetime | None = None


class EventTimes(BaseModel):
    """The four phase times stored on an action's event."""

    proposed_at: datetime | None = None
    authorized_at: datetime | None = None
    sent_at: datetime | None = None
    acked_at: datetime | None = None


class AuthorizationReads(NamedTuple):
    """What the authorization step reads before it decides, read together."""

    ledger: LedgerView | None
    saga_session: str | None
    approval: ApprovalView | None
    # With `hold=True`: the open transaction the reads began (an opaque handle), for the
    # intent or the refusal to commit in; None when the store has none.
    tx: Any = None


NO_READS = AuthorizationReads(None, None, None)


class HarnessStore(Protocol):
    def saga_session(self, saga_id: str) -> str | None:
        """The saga's current run (its session), or None when there is no such saga."""
        ...

    def find_approval(self, saga_id: str, version_digest: str) -> ApprovalView | None: ...

    def ledger_get(self, key: str) -> LedgerView | None: ...

    def authorization_reads(
        self,
        key: str | None,
        saga_id: str | None,
        version_digest: str | None,
        *,
        hold: bool = False,
        lock: str | None = None,
    ) -> AuthorizationReads:
        """`ledger_get(key)`, `saga_session(saga_id)` and `find_approval(saga_id,
        version_digest)` in one read (one session on SQL); a None argument skips
        its read(s) and leaves that field None.

        `hold=True` keeps the reads' transaction open on a pinned connection
        (`AuthorizationReads.tx`): pass it as `tx` to the write that follows
        (`begin_effect`, `record_event`), which commits it, and to `finish_effect`,
        which runs on the same connection; `release(tx)` ends it. `lock` (with `hold`):
        the saga whose chains that write appends to, locked by the reads already."""
        ...

    def release(self, tx: Any) -> None:
        """Roll back what `tx` left open and give its connection back (None: nothing to do)."""
        ...

    def record_event(
        self,
        *,
        saga_id: str | None,
        actor: str,
        kind: str,
        status: str,
        tool: str | None = None,
        detail: dict[str, Any] | None = None,
        times: EventTimes | None = None,
        parent_event_id: str | None = None,
        hook: Callable[[Any], None] | None = None,
        charge: Charge | None = None,
        tx: Any = None,
    ) -> str:
        """Append one event (and run `hook` in the same transaction); with `charge`, charge
        the saga's budget in it too, raising `BudgetExhausted` (nothing written) when spent."""
        ...

    def begin_effect(
        self,
        *,
        saga_id: str | None,
        actor: str,
        state: AgentState,
        approval_id: str | None,
        execution: str | None,
        times: EventTimes,
        claim_seconds: float = 30.0,
        guard: Callable[[Any], None] | None = None,
        charge: Charge | None = None,
        tx: Any = None,
    ) -> str:
        """Commit approval consumption, checkpoint, ledger `pending` (claimed for
        `claim_seconds`) and the intent event.

        `guard` runs first inside that transaction (after the saga is locked);
        whatever it raises rolls the transaction back and propagates.

        `charge` is added to the saga's budget in the same transaction.

        Raises `ApprovalRefused` if the approval can no longer be consumed,
        `KeyInFlight` if another caller holds the key in flight, another
        `IdempotencyConflict` if the key is settled or used with other arguments,
        and `BudgetExhausted` if the charge would overspend the saga's budget.
        """
        ...

    def finish_effect(
        self,
        *,
        key: str,
        ledger_status: str,
        result: dict[str, Any] | None,
        event: dict[str, Any],
        hook: Callable[[Any], None] | None = None,
        tx: Any = None,
    ) -> str:
        """Commit the ledger outcome, the result event and the tool's own record together."""
        ...

    def reconcile(
        self,
        key: str,
        outcome: Literal["confirmed", "absent"],
        receipt: dict[str, Any] | None = None,
        *,
        actor: str = "person",
        reason: str = "reconciled",
        detail: dict[str, Any] | None = None,
        within: Any = None,
    ) -> None:
        """A person settles a key: `confirmed` records the receipt (`done`), `absent`
        frees it for another attempt with the same key; a `reconcile` event (with
        `detail` added) names the person and the reason.

        `within` is the caller's open transaction (a unit of work on SQL) to
        join, so the ledger and the caller's own changes commit together.
        Raises `NotFound` when no ledger row holds `key`.
        """
        ...

    def mark_uncertain(self, key: str, *, within: Any = None) -> bool:
        """Mark a key whose call may have run (`pending` or `uncertain`) as
        `uncertain`; False, changing nothing, for any other status or no row.
        `within` as for `reconcile`."""
        ...


class Planner(Protocol):
    """Proposes the next tool call from the transcript so far; None means done."""

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None: ...


__all__ = [
    "NO_READS",
    "AuthorizationReads",
    "EventTimes",
    "HarnessStore",
    "LedgerView",
    "Planner",
]

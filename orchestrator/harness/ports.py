"""Ports the engine talks through: the store and the planner. No I/O here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict

from orchestrator.harness.approvals import ApprovalView
from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.handles import HandleUse
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


class HeldTx(Protocol):
    """A transaction a store keeps open for its caller: the one a call's authorization reads
    began (`AuthorizationReads.tx`), or the caller's own unit of work (`within`). The
    engine hands it back to the store that made it and never looks inside."""

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run `fn` once the transaction has committed."""
        ...


class AuthorizationReads(NamedTuple):
    """What the authorization step reads before it decides, read together."""

    ledger: LedgerView | None
    saga_session: str | None
    approval: ApprovalView | None
    # With `hold=True`: the open transaction the reads began, for the intent or the
    # refusal to commit in; None when the store has none.
    tx: HeldTx | None = None


NO_READS = AuthorizationReads(None, None, None)


class AuthorizationReader(Protocol):
    """What the authorization step reads before it decides, and the transaction it may hold."""

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

    def release(self, tx: HeldTx | None) -> None:
        """Roll back what `tx` left open and give its connection back (None: nothing to do)."""
        ...


class Approvals(Protocol):
    """Approvals and the sagas' runs they are bound to (`begin_effect` consumes them)."""

    def saga_session(self, saga_id: str) -> str | None:
        """The saga's current run (its session), or None when there is no such saga."""
        ...

    def find_approval(self, saga_id: str, version_digest: str) -> ApprovalView | None: ...


class Ledger(Protocol):
    """One effect per business key: its record, a person's settlement, and its retention."""

    def ledger_get(self, key: str) -> LedgerView | None: ...

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
        tx: HeldTx | None = None,
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
        tx: HeldTx | None = None,
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
        within: HeldTx | None = None,
    ) -> None:
        """A person settles a key: `confirmed` records the receipt (`done`), `absent`
        frees it for another attempt with the same key; a `reconcile` event (with
        `detail` added) names the person and the reason.

        `within` is the caller's open transaction (a unit of work on SQL) to
        join, so the ledger and the caller's own changes commit together.
        Raises `NotFound` when no ledger row holds `key`.
        """
        ...

    def mark_uncertain(self, key: str, *, within: HeldTx | None = None) -> bool:
        """Mark a key whose call may have run (`pending` or `uncertain`) as
        `uncertain`; False, changing nothing, for any other status or no row.
        `within` as for `reconcile`."""
        ...

    def prune(
        self,
        saga_ids: Sequence[str],
        cutoff: datetime,
        *,
        within: HeldTx | None = None,
        count_only: bool = False,
    ) -> int:
        """Remove the rows of `saga_ids` last changed before `cutoff`; how many (with
        `count_only`, count them and remove none). `within` as for `reconcile`."""
        ...


class EventChain(Protocol):
    """The saga's hash-chained event log."""

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
        tx: HeldTx | None = None,
    ) -> str:
        """Append one event (and run `hook` in the same transaction); with `charge`, charge
        the saga's budget in it too, raising `BudgetExhausted` (nothing written) when spent."""
        ...


class HarnessStore(AuthorizationReader, Approvals, Ledger, EventChain, Protocol):
    """Everything the tool path asks of its store: one path authorizes (`AuthorizationReader`,
    `Approvals`), records its effect (`Ledger`) and logs every step (`EventChain`)."""


class HandleUses(Protocol):
    """The durable count of capability handles' uses, shared by every process and retry."""

    def spend(self, tx: Any, use: HandleUse) -> None:
        """Count `use` inside `tx`, the transaction that records the call (a write's intent,
        its saga locked; a read's result); the same use again counts nothing. Raises `PolicyRefused` when the handle has no use left."""
        ...


class Planner(Protocol):
    """Proposes the next tool call from the transcript so far; None means done."""

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None: ...


__all__ = [
    "NO_READS",
    "Approvals",
    "AuthorizationReader",
    "AuthorizationReads",
    "EventChain",
    "EventTimes",
    "HandleUses",
    "HarnessStore",
    "HeldTx",
    "Ledger",
    "LedgerView",
    "Planner",
]

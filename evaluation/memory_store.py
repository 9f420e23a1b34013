"""An in-memory `HarnessStore`: the SQL store's semantics without a database.

It mirrors `orchestrator.store.harness_store.SqlHarnessStore` so the engine's
unit tests (and `pressroom evidence harness`) run with no database:

* `begin_effect` consumes the approval once (the same execution may go on
  using it), appends a hash-chained checkpoint per saga, sets the ledger row
  `pending` and records the intent event, all or nothing;
* ledger rows move through `pending | done | uncertain | failed | absent`;
  a key held with other arguments, or `done`/`uncertain`, is a conflict;
* `finish_effect` records the outcome, the result event and, for `done`, the
  tool's recorder hook in one transaction; `record_event` runs its hook in
  the transaction of the event. A hook that raises rolls the whole
  transaction back. Hooks receive a small `MemoryTx`.

Seeding helpers (`add_saga`, `add_approval`, `issue_approval`, `new_run`,
`reconcile`) stand in for the saga tables and a person's actions. One
re-entrant lock guards everything, so the store is safe across threads and
hooks may read the store. Pure Python: no I/O.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from orchestrator.core.errors import ApprovalRefused, IdempotencyConflict, KeyInFlight, NotFound
from orchestrator.harness.approvals import ApprovalBinding, ApprovalView, mint, session_for
from orchestrator.harness.budget import Charge, Spent, exhausted, over
from orchestrator.harness.checkpoints import GENESIS, AgentState, chain_hash
from orchestrator.harness.ledger_status import RESTARTABLE, LedgerStatus
from orchestrator.harness.ports import AuthorizationReads, EventTimes, HeldTx, LedgerView


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    event_id: str
    saga_id: str | None
    actor: str
    kind: str
    status: str
    tool: str | None
    detail: dict[str, Any]
    times: EventTimes
    parent_event_id: str | None
    created_at: datetime


@dataclass(frozen=True)
class StoredCheckpoint:
    seq: int
    saga_id: str | None
    event_id: str
    step: int
    state: AgentState
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class StoredApproval:
    approval_id: str
    binding: ApprovalBinding
    token: str
    issued_seq: int
    consumed_at: datetime | None = None
    consumed_by: str | None = None
    voided_at: datetime | None = None

    def view(self) -> ApprovalView:
        return ApprovalView(
            approval_id=self.approval_id,
            binding=self.binding,
            token=self.token,
            consumed_by=self.consumed_by,
            voided=self.voided_at is not None,
        )


@dataclass(frozen=True)
class _LedgerEntry:
    key: str
    tool: str
    saga_id: str | None
    args_digest: str
    status: str
    result: dict[str, Any] | None = None
    event_id: str | None = None
    attempts: int = 1
    claimed_until: datetime | None = None
    updated_at: datetime | None = None  # the last change: what `prune` compares

    def view(self) -> LedgerView:
        return LedgerView.model_validate(asdict(self))  # asdict copies `result`; `event_id` is dropped


@dataclass(frozen=True)
class MemoryTx:
    """What a hook receives: the store and the event its transaction records."""

    store: MemoryHarnessStore
    event_id: str
    saga_id: str | None


@dataclass
class _State:
    sagas: dict[str, int] = field(default_factory=dict)  # saga id -> run
    approvals: dict[str, StoredApproval] = field(default_factory=dict)
    ledger: dict[str, _LedgerEntry] = field(default_factory=dict)
    events: list[StoredEvent] = field(default_factory=list)
    checkpoints: list[StoredCheckpoint] = field(default_factory=list)
    seq: int = 0
    budgets: dict[str, Spent] = field(default_factory=dict)  # saga id -> spent so far

    def copy(self) -> _State:
        # Values are frozen, so copying the containers is a full snapshot.
        return _State(
            dict(self.sagas),
            dict(self.approvals),
            dict(self.ledger),
            list(self.events),
            list(self.checkpoints),
            self.seq,
            dict(self.budgets),
        )


def _charge(st: _State, c: Charge) -> None:
    now = st.budgets.get(c.saga_id, Spent())
    if over(now, c):
        raise exhausted(c, now)
    st.budgets[c.saga_id] = Spent(now.calls + c.calls, now.tokens + c.tokens, now.cost + c.cost)


class MemoryHarnessStore:
    """A thread-safe, in-process `HarnessStore` plus seeding helpers for tests."""

    def __init__(self, *, clock: Callable[[], datetime] = _utcnow) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._state = _State()

    @contextmanager
    def _transaction(self) -> Iterator[_State]:
        """All or nothing: a raising body (or hook) restores the snapshot."""
        with self._lock:
            snapshot = self._state.copy()
            try:
                yield self._state
            except BaseException:
                # In place: a hook's own (nested) transaction holds the same object.
                vars(self._state).update(vars(snapshot))
                raise

    def _next_seq(self, st: _State) -> int:
        st.seq += 1
        return st.seq

    # -- HarnessStore --------------------------------------------------------
    def saga_session(self, saga_id: str) -> str | None:
        with self._lock:
            run = self._state.sagas.get(saga_id)
            return session_for(saga_id, run) if run is not None else None

    def find_approval(self, saga_id: str, version_digest: str) -> ApprovalView | None:
        with self._lock:
            rows = [
                a
                for a in self._state.approvals.values()
                if a.binding.saga_id == saga_id and a.binding.version_digest == version_digest
            ]
            if not rows:
                return None
            return max(rows, key=lambda a: a.issued_seq).view()

    def ledger_get(self, key: str) -> LedgerView | None:
        with self._lock:
            entry = self._state.ledger.get(key)
            return entry.view() if entry is not None else None

    def authorization_reads(
        self,
        key: str | None,
        saga_id: str | None,
        version_digest: str | None,
        *,
        hold: bool = False,
        lock: str | None = None,
    ) -> AuthorizationReads:
        # `hold` and `lock` are no-ops here: each method below is its own transaction under the lock.
        with self._lock:  # re-entrant: one consistent view of the three
            return AuthorizationReads(
                ledger=self.ledger_get(key) if key else None,
                saga_session=self.saga_session(saga_id) if saga_id is not None else None,
                approval=self.find_approval(saga_id, version_digest)
                if saga_id is not None and version_digest is not None
                else None,
            )

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
        with self._transaction() as st:
            if charge is not None:
                _charge(st, charge)
            event = self._add_event(
                st,
                event_id=uuid.uuid4().hex,
                saga_id=saga_id,
                actor=actor,
                kind=kind,
                status=status,
                tool=tool,
                detail=detail,
                times=times,
                parent_event_id=parent_event_id,
            )
            if hook is not None:
                hook(MemoryTx(self, event.event_id, saga_id))
            return event.event_id

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
        key = state.idempotency_key
        with self._transaction() as st:
            if guard is not None:
                guard(st)
            if charge is not None:
                _charge(st, charge)
            if approval_id is not None:
                self._consume(st, approval_id, execution or "")
            if key:
                self._ledger_pending(st, key, state, saga_id, claim_seconds)
            prev = next((c.hash for c in reversed(st.checkpoints) if c.saga_id == saga_id), GENESIS)
            st.checkpoints.append(
                StoredCheckpoint(
                    seq=self._next_seq(st),
                    saga_id=saga_id,
                    event_id=state.event_id,
                    step=state.step,
                    state=state,
                    prev_hash=prev,
                    hash=chain_hash(prev, state),
                )
            )
            self._add_event(
                st,
                event_id=state.event_id,
                saga_id=saga_id,
                actor=actor,
                kind="intent",
                status="pending",
                tool=state.tool,
                detail={"key": key, "args_digest": state.args_digest, "approval_id": approval_id},
                times=times,
                parent_event_id=None,
            )
        return state.event_id

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
        with self._transaction() as st:
            added = self._add_event(st, event_id=uuid.uuid4().hex, **event)
            entry = st.ledger.get(key)
            if entry is not None:
                st.ledger[key] = replace(
                    entry,
                    status=ledger_status,
                    result=dict(result) if result is not None else None,
                    event_id=added.event_id,
                    updated_at=self._clock(),
                )
            if hook is not None and ledger_status == LedgerStatus.DONE:
                hook(MemoryTx(self, added.event_id, added.saga_id))
            return added.event_id

    def release(self, tx: HeldTx | None) -> None:
        return None

    def spent(self, saga_id: str) -> Spent:
        with self._lock:
            return self._state.budgets.get(saga_id, Spent())

    # -- the pieces of a transaction ----------------------------------------
    def _add_event(
        self,
        st: _State,
        *,
        event_id: str,
        saga_id: str | None,
        actor: str,
        kind: str,
        status: str,
        tool: str | None = None,
        detail: dict[str, Any] | None = None,
        times: EventTimes | None = None,
        parent_event_id: str | None = None,
    ) -> StoredEvent:
        event = StoredEvent(
            seq=self._next_seq(st),
            event_id=event_id,
            saga_id=saga_id,
            actor=actor,
            kind=kind,
            status=status,
            tool=tool,
            detail=dict(detail or {}),
            # A copy: the engine keeps filling its own `EventTimes` after this commit.
            times=times.model_copy() if times is not None else EventTimes(),
            parent_event_id=parent_event_id,
            created_at=self._clock(),
        )
        st.events.append(event)
        return event

    def _consume(self, st: _State, approval_id: str, execution: str) -> None:
        """Consume once; the execution that consumed it may go on using it."""
        row = st.approvals.get(approval_id)
        if row is None:
            raise ApprovalRefused("approval not found", approval_id=approval_id)
        if row.voided_at is not None:
            raise ApprovalRefused("approval was voided", approval_id=approval_id)
        if row.consumed_at is not None:
            if row.consumed_by != execution:
                raise ApprovalRefused(
                    "approval was already used by another execution", approval_id=approval_id
                )
            return
        now = self._clock()
        if row.binding.expires_at <= now:
            raise ApprovalRefused("approval expired", approval_id=approval_id)
        st.approvals[approval_id] = replace(row, consumed_at=now, consumed_by=execution)

    def _ledger_pending(
        self, st: _State, key: str, state: AgentState, saga_id: str | None, claim_seconds: float
    ) -> None:
        now = self._clock()
        until = now + timedelta(seconds=claim_seconds)
        entry = st.ledger.get(key)
        if entry is None:
            st.ledger[key] = _LedgerEntry(
                key=key,
                tool=state.tool,
                saga_id=saga_id,
                args_digest=state.args_digest,
                status=LedgerStatus.PENDING,
                claimed_until=until,
                updated_at=now,
            )
            return
        if entry.args_digest != state.args_digest:
            raise IdempotencyConflict(f"key {key} was used with other arguments", key=key)
        if (
            entry.status == LedgerStatus.PENDING
            and entry.claimed_until is not None
            and entry.claimed_until > now
        ):
            raise KeyInFlight(f"key {key} is in flight", key=key)
        if entry.status not in RESTARTABLE:
            raise IdempotencyConflict(f"key {key} is {entry.status}", key=key)
        st.ledger[key] = replace(
            entry,
            status=LedgerStatus.PENDING,
            attempts=entry.attempts + 1,
            claimed_until=until,
            updated_at=now,
        )

    # -- seeding: what the saga tables and people would have done ------------
    def add_saga(self, saga_id: str, *, run: int = 1, destinations: Sequence[str] = ()) -> str:
        """Make `saga_id` known with its run; returns its session."""
        with self._lock:
            self._state.sagas[saga_id] = run
            return session_for(saga_id, run)

    def new_run(self, saga_id: str) -> str:
        """A new head version: unconsumed approvals are voided, the run moves on."""
        with self._transaction() as st:
            if saga_id not in st.sagas:
                raise NotFound(f"no saga {saga_id!r}", saga_id=saga_id)
            self._void(st, saga_id)
            st.sagas[saga_id] += 1
            return session_for(saga_id, st.sagas[saga_id])

    def add_approval(
        self,
        binding: ApprovalBinding,
        token: str,
        *,
        consumed_by: str | None = None,
        voided: bool = False,
    ) -> str:
        """Store an approval as given (a wrong token stays wrong); returns its id."""
        with self._transaction() as st:
            now = self._clock()
            approval = StoredApproval(
                approval_id=uuid.uuid4().hex,
                binding=binding,
                token=token,
                issued_seq=self._next_seq(st),
                consumed_at=now if consumed_by is not None else None,
                consumed_by=consumed_by,
                voided_at=now if voided else None,
            )
            st.approvals[approval.approval_id] = approval
            return approval.approval_id

    def issue_approval(self, binding: ApprovalBinding, signing_key: bytes) -> ApprovalView:
        """A person's approval: minted with the signing key."""
        approval_id = self.add_approval(binding, mint(binding, signing_key))
        with self._lock:
            return self._state.approvals[approval_id].view()

    def _void(self, st: _State, saga_id: str) -> int:
        now = self._clock()
        voided = 0
        for approval_id, row in list(st.approvals.items()):
            if row.binding.saga_id == saga_id and row.consumed_at is None and row.voided_at is None:
                st.approvals[approval_id] = replace(row, voided_at=now)
                voided += 1
        return voided

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
        """A person settles an `uncertain` key: `confirmed` records the receipt, `absent` frees it.

        `within` is accepted for the port's sake: every call here is its own
        all-or-nothing transaction, nested inside a hook's when called from one."""
        with self._transaction() as st:
            entry = st.ledger.get(key)
            if entry is None:
                raise NotFound(f"no ledger row {key}", key=key)
            confirmed = outcome == "confirmed"
            result = dict(receipt or {"reconciled_by": actor}) if confirmed else None
            event = self._add_event(
                st,
                event_id=uuid.uuid4().hex,
                saga_id=entry.saga_id,
                actor=actor,
                kind="reconcile",
                status=outcome,
                tool=entry.tool,
                detail={**(detail or {}), "key": key, "reason": reason, "outcome": outcome},
                times=None,
                parent_event_id=None,
            )
            status = LedgerStatus.DONE if confirmed else LedgerStatus.ABSENT
            st.ledger[key] = replace(
                entry, status=status, result=result, event_id=event.event_id, updated_at=self._clock()
            )

    def mark_uncertain(self, key: str, *, within: HeldTx | None = None) -> bool:
        with self._transaction() as st:
            entry = st.ledger.get(key)
            if entry is None or entry.status not in (LedgerStatus.PENDING, LedgerStatus.UNCERTAIN):
                return False
            st.ledger[key] = replace(entry, status=LedgerStatus.UNCERTAIN, updated_at=self._clock())
            return True

    def prune(
        self,
        saga_ids: Sequence[str],
        cutoff: datetime,
        *,
        within: HeldTx | None = None,
        count_only: bool = False,
    ) -> int:
        with self._transaction() as st:
            ids = set(saga_ids)
            old = [
                key
                for key, entry in st.ledger.items()
                if entry.saga_id in ids and entry.updated_at is not None and entry.updated_at < cutoff
            ]
            if not count_only:
                for key in old:
                    del st.ledger[key]
            return len(old)

    # -- reading -------------------------------------------------------------
    def events(self, *, saga_id: str | None = None, kind: str | None = None) -> list[StoredEvent]:
        with self._lock:
            return [
                e
                for e in self._state.events
                if (saga_id is None or e.saga_id == saga_id) and (kind is None or e.kind == kind)
            ]

    def checkpoints(self, saga_id: str | None) -> list[StoredCheckpoint]:
        with self._lock:
            return [c for c in self._state.checkpoints if c.saga_id == saga_id]

    def checkpoint_chain(self, saga_id: str | None) -> list[tuple[str, str, AgentState]]:
        """The saga's checkpoints as `verify_chain` reads them."""
        return [(c.prev_hash, c.hash, c.state) for c in self.checkpoints(saga_id)]

    def approvals(self, saga_id: str | None = None) -> list[ApprovalView]:
        with self._lock:
            rows = sorted(self._state.approvals.values(), key=lambda a: a.issued_seq)
            return [a.view() for a in rows if saga_id is None or a.binding.saga_id == saga_id]

    def ledger(self) -> list[LedgerView]:
        with self._lock:
            return [entry.view() for entry in self._state.ledger.values()]


__all__ = ["MemoryHarnessStore", "MemoryTx", "StoredApproval", "StoredCheckpoint", "StoredEvent"]

"""The harness store's reads and its pre-execute record on SQL: the authorization reads,
the saga's chains held, the checkpoint, and the intent's writes together.

Helpers of `orchestrator.store.harness_store` (the harness ports' SQL implementation);
approvals are `orchestrator.store.approval_rows`, the ledger `orchestrator.store.ledger_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, Table, bindparam, func, insert, literal, true
from sqlalchemy import select as core_select
from sqlmodel import Session

from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import GENESIS, AgentState, chain_hash
from orchestrator.harness.ports import AuthorizationReads
from orchestrator.store.adapter import StorageAdapter, adapter_for
from orchestrator.store.approval_rows import (
    APPROVAL_COLUMNS,
    APPROVALS,
    CONSUME,
    CONSUMED_COLUMNS,
    LATEST_APPROVAL,
    approval_of_columns,
    consume_approval,
    consume_params,
    consumed,
)
from orchestrator.store.budget import charge as charge_budget
from orchestrator.store.budget import charge_params, charge_statement, charged, refuse_over
from orchestrator.store.events import WithEvent, chain_held, held_heads, hold_chain
from orchestrator.store.ledger_rows import (
    LEDGER_COLUMNS,
    ledger_known,
    ledger_new,
    ledger_pending,
    ledger_values,
    ledger_view,
)
from orchestrator.store.row_values import bound
from orchestrator.store.tables import CheckpointRow, LedgerRow, SagaRow

_LEDGER: Table = LedgerRow.__table__  # type: ignore[attr-defined]
_CHECKPOINTS: Table = CheckpointRow.__table__  # type: ignore[attr-defined]
_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_CHECKPOINT_NEW_COLUMNS = ("saga_id", "event_id", "step", "state", "prev_hash", "hash", "created_at")
_CHECKPOINT_INSERT = insert(_CHECKPOINTS).values(bound(_CHECKPOINTS, _CHECKPOINT_NEW_COLUMNS, "c_"))
_CHECKPOINT_NEW = WithEvent(_CHECKPOINT_INSERT)
_CHECKPOINT_HEAD = (
    core_select(_CHECKPOINTS.c.hash)
    .where(_CHECKPOINTS.c.saga_id == bindparam("saga_id"))
    .order_by(_CHECKPOINTS.c.seq.desc())
    .limit(1)
)
# The authorization's three reads in one statement: each an outer join onto one row, so a
# missing ledger row, saga or approval (or an unbound key) reads as nulls.
_ONE_ROW = core_select(literal(1).label("one")).subquery("one_row")
_AUTHORIZATION_READS = core_select(
    *(c.label(f"ledger_{c.name}") for c in LEDGER_COLUMNS),
    _SAGAS.c.id.label("saga_id"),
    _SAGAS.c.run.label("saga_run"),
    *(c.label(f"approval_{c.name}") for c in APPROVAL_COLUMNS),
).select_from(
    _ONE_ROW.outerjoin(_LEDGER, _LEDGER.c.key == bindparam("k"))
    .outerjoin(_SAGAS, _SAGAS.c.id == bindparam("sid"))
    .outerjoin(APPROVALS, APPROVALS.c.id == LATEST_APPROVAL)
)
# The same, taking the saga's lock and its chains' heads (`hold_chains`) along.
_AUTHORIZATION_READS_LOCKING = _AUTHORIZATION_READS.add_columns(
    func.pressroom_hold_chains(bindparam("lock", type_=String)).label("heads")
)
# The saga's lock and both its chains' heads in one statement (migration 0007).
_HOLD_CHAINS = core_select(func.pressroom_hold_chains(bindparam("saga_id", type_=String)))
_LOOSE_CHECKPOINT_HEAD = (
    core_select(_CHECKPOINTS.c.hash)
    .where(_CHECKPOINTS.c.saga_id.is_(None))
    .order_by(_CHECKPOINTS.c.seq.desc())
    .limit(1)
)


def read_for_authorization(
    s: Session, key: str | None, saga_id: str | None, version_digest: str | None, lock: str | None = None
) -> AuthorizationReads:
    """The key's ledger row, the saga's session and the approval for its version: one statement.
    With `lock` (a database with `one_statement_writes`), the same statement takes that saga's
    lock and both its chains' heads (`hold_chains`), for the write the reads open."""
    params = {"k": key, "sid": saga_id, "digest": version_digest, "lock": lock}
    conn = s.connection()
    locking = lock is not None and adapter_for(conn).one_statement_writes
    found = conn.execute(_AUTHORIZATION_READS_LOCKING if locking else _AUTHORIZATION_READS, params)
    values: tuple[Any, ...] = tuple(found.one())
    if locking:
        assert lock is not None
        _keep_heads(s, lock, values[-1])
    n, m = len(LEDGER_COLUMNS), len(APPROVAL_COLUMNS)
    ledger, (saga, run), approval = values[:n], values[n : n + 2], values[n + 2 : n + 2 + m]
    return AuthorizationReads(
        ledger=ledger_view(*ledger) if ledger[0] is not None else None,
        saga_session=f"{saga}:{run}" if saga is not None else None,
        approval=approval_of_columns(*approval)
        if approval[0] is not None and version_digest is not None
        else None,
    )


def saga_session_of(s: Session, saga_id: str) -> str | None:
    saga = s.get(SagaRow, saga_id)
    return f"{saga.id}:{saga.run}" if saga else None


def hold_chains(s: Session, saga_id: str) -> str:
    """`hold_chain` for a transaction that writes a checkpoint: the saga locked, its event head
    kept, and its checkpoint head returned (PostgreSQL: one round trip, migration 0007; none
    when this transaction's authorization reads took them)."""
    kept = held_heads(s, "checkpoints").get(saga_id)
    if kept is not None:
        return kept
    conn = s.connection()
    if not adapter_for(conn).one_statement_writes:  # the unit of work holds the write lock already
        hold_chain(s, saga_id)
        head: str = conn.execute(_CHECKPOINT_HEAD, {"saga_id": saga_id}).scalar() or GENESIS
    else:
        head = _keep_heads(s, saga_id, conn.execute(_HOLD_CHAINS, {"saga_id": saga_id}).scalar_one())
    return head


def _keep_heads(s: Session, saga_id: str, heads: list[str | None]) -> str:
    """Keep what `pressroom_hold_chains` returned: the saga's chains are held. Its checkpoint head."""
    events_head, checkpoints_head = heads
    chain_held(s, saga_id, events_head)
    head = held_heads(s, "checkpoints").setdefault(saga_id, checkpoints_head or GENESIS)
    return head


def add_checkpoint(
    s: Session,
    saga_id: str | None,
    state: AgentState,
    head: str | None,
    *,
    event: dict[str, Any],
    now: datetime,
) -> None:
    """The state before a side effect, chained onto the saga's last checkpoint (`head`, from
    `hold_chains`, or read now: the caller holds the saga's lock, so the chain cannot fork),
    and its intent `event`, in one round trip on PostgreSQL."""
    _CHECKPOINT_NEW.execute(s, _checkpoint_values(s, saga_id, state, head, now), **event)


def _checkpoint_values(
    s: Session, saga_id: str | None, state: AgentState, head: str | None, now: datetime
) -> dict[str, Any]:
    """A checkpoint's parameters for `_CHECKPOINT_INSERT`, chained onto `head` (or the head read now)."""
    if head is not None:
        prev_hash = head
    elif saga_id is not None:
        prev_hash = s.connection().execute(_CHECKPOINT_HEAD, {"saga_id": saga_id}).scalar() or GENESIS
    else:
        prev_hash = s.connection().execute(_LOOSE_CHECKPOINT_HEAD).scalar() or GENESIS
    return {
        "c_saga_id": saga_id,
        "c_event_id": state.event_id,
        "c_step": state.step,
        "c_state": state.model_dump(mode="json"),
        "c_prev_hash": prev_hash,
        "c_hash": chain_hash(prev_hash, state),
        "c_created_at": now,
    }


@dataclass(frozen=True)
class Intent:
    """The writes of an intent that come after its checks (`write_intent`)."""

    saga_id: str | None
    state: AgentState
    head: str | None  # the saga's checkpoint head (`hold_chains`)
    event: dict[str, Any]  # the intent event (`insert_event`'s fields)
    now: datetime
    until: datetime  # the key's claim
    charge: Charge | None = None
    approval_id: str | None = None
    execution: str = ""


def write_intent(s: Session, i: Intent) -> None:
    """The budget charge, the approval's consumption, the key's ledger row `pending`, the
    checkpoint and the intent event; refused, in that order, by `BudgetExhausted`,
    `ApprovalRefused` or `ApproverLapsed`, and `KeyInFlight` or `IdempotencyConflict`, with
    the caller's transaction to roll back.

    With `one_statement_writes` (PostgreSQL): one statement. The five write five tables and
    none reads what another writes, so they are sub-statements of one (writable CTEs); its
    one row says which of the three that may refuse did not take, and those are settled as
    the statements one by one would have settled them (a refusal rolls everything back, so
    what ran beside it is undone). Otherwise (SQLite): one statement after another."""
    key = i.state.idempotency_key
    if i.charge is not None:
        refuse_over(s, i.charge)
    adapter = adapter_for(s.connection())
    if not adapter.one_statement_writes:
        if i.charge is not None:
            charge_budget(s, i.charge)
        if i.approval_id is not None:
            consume_approval(s, i.approval_id, i.execution, i.now)
        if key:
            ledger_pending(s, key, i.state, i.saga_id, i.now, i.until)
        add_checkpoint(s, i.saga_id, i.state, i.head, event=i.event, now=i.now)
        return
    params = _checkpoint_values(s, i.saga_id, i.state, i.head, i.now)
    if i.charge is not None:
        params |= charge_params(i.charge, i.now)
    if i.approval_id is not None:
        params |= consume_params(i.approval_id, i.execution, i.now)
    if key:
        params |= ledger_values(key, i.state, i.saga_id, i.now, i.until)
    consume = i.approval_id is not None
    variant = (None if i.charge is None else i.charge.limit > 0, consume, bool(key))
    statements = adapter.built(_intent_statements)
    statement = statements.get(variant) or statements.setdefault(
        variant, _intent_statement(adapter, i.charge, consume, bool(key))
    )
    row = statement.execute(s, params, **i.event).one()
    if i.charge is not None:
        charged(s, i.charge, (row.calls, row.tokens, row.cost))
    if i.approval_id is not None:
        consumed(s, i.approval_id, i.execution, i.now, row)
    if key and row.ledgered is None:
        ledger_known(s, key, i.state, i.now, i.until)


_Variant = tuple[bool | None, bool, bool]


def _intent_statements(_adapter: StorageAdapter) -> dict[_Variant, WithEvent]:
    """`write_intent`'s statements of one adapter, by what an intent writes (each built once)."""
    return {}


def _intent_statement(
    adapter: StorageAdapter, charge: Charge | None, consume: bool, ledger: bool
) -> WithEvent:
    source: Any = _ONE_ROW
    columns: list[Any] = []
    if charge is not None:
        charged_cte = charge_statement(adapter, charge).cte("charged")
        source = source.outerjoin(charged_cte, true())
        columns += [charged_cte.c.calls, charged_cte.c.tokens, charged_cte.c.cost]
    if consume:
        consumed_cte = CONSUME.cte("consumed")
        source = source.outerjoin(consumed_cte, true())
        columns += [consumed_cte.c[name] for name in CONSUMED_COLUMNS]
    if ledger:
        ledgered = adapter.built(ledger_new).cte("ledgered")
        source = source.outerjoin(ledgered, true())
        columns.append(ledgered.c.key.label("ledgered"))
    checkpoint = _CHECKPOINT_INSERT.cte("new_checkpoint")
    select_all = core_select(*(columns or [literal(1).label("one")])).select_from(source).add_cte(checkpoint)
    return WithEvent(select_all)


__all__ = [
    "Intent",
    "add_checkpoint",
    "hold_chains",
    "read_for_authorization",
    "saga_session_of",
    "write_intent",
]

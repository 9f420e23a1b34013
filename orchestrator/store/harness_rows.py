"""The harness store's rows and queries on SQL: approvals, the ledger, the call's pinned transaction.

Helpers of `orchestrator.store.harness_store` (the `HarnessStore` adapter): the
queries its authorization reads and its pre-execute record are made of.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import String, Table, bindparam, func, insert, literal, true, update
from sqlalchemy import select as core_select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlmodel import Session

from orchestrator.core.errors import (
    ApprovalRefused,
    ApproverLapsed,
    IdempotencyConflict,
    KeyInFlight,
)
from orchestrator.harness.approvals import ApprovalBinding, ApprovalView
from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import GENESIS, AgentState, chain_hash
from orchestrator.harness.ledger_status import RESTARTABLE, LedgerStatus
from orchestrator.harness.ports import AuthorizationReads, LedgerView
from orchestrator.store.budget import charge as charge_budget
from orchestrator.store.budget import charge_params, charge_statement, charged, refuse_over
from orchestrator.store.db import UnitOfWork, unit_of_work, writer
from orchestrator.store.events import ChainedEvent, WithEvent, chain_held, held_heads, hold_chain
from orchestrator.store.people import approver_lapse, lapse_reason
from orchestrator.store.people_tables import UserRow
from orchestrator.store.tables import (
    ApprovalRow,
    CheckpointRow,
    LedgerRow,
    SagaRow,
    new_id,
    utcnow,
)

# The write path's statements, built once and run on the call's connection
# (as the consumer's are): no ORM execution path, no identity map to keep.
_LEDGER: Table = LedgerRow.__table__  # type: ignore[attr-defined]
_APPROVALS: Table = ApprovalRow.__table__  # type: ignore[attr-defined]
_CHECKPOINTS: Table = CheckpointRow.__table__  # type: ignore[attr-defined]


def _bound(table: Table, names: tuple[str, ...], prefix: str) -> dict[str, Any]:
    """`names` of `table`, each bound as `prefix` + name: an INSERT's values that can share
    a statement with other INSERTs (`write_intent`) without their parameters meeting."""
    return {name: bindparam(prefix + name, type_=table.c[name].type) for name in names}


_LEDGER_HELD = (
    core_select(_LEDGER.c.args_digest, _LEDGER.c.status, _LEDGER.c.claimed_until)
    .where(_LEDGER.c.key == bindparam("k"))
    .with_for_update()
)
# A key's first call: its row, unless one is there (then read, locked, below).
_LEDGER_NEW_COLUMNS = (
    "key",
    "tool",
    "saga_id",
    "args_digest",
    "status",
    "attempts",
    "claimed_until",
    "created_at",
    "updated_at",
)
_LEDGER_NEW = {
    name: dialect_insert(_LEDGER)
    .values(_bound(_LEDGER, _LEDGER_NEW_COLUMNS, "l_"))
    .on_conflict_do_nothing(index_elements=[_LEDGER.c.key])
    .returning(_LEDGER.c.key)
    for name, dialect_insert in (("postgresql", pg_insert), ("sqlite", sqlite_insert))
}
_LEDGER_AGAIN = (
    update(_LEDGER)
    .where(_LEDGER.c.key == bindparam("k"))
    .values(
        status=LedgerStatus.PENDING.value,
        attempts=_LEDGER.c.attempts + 1,
        claimed_until=bindparam("b_until", type_=_LEDGER.c.claimed_until.type),
        updated_at=bindparam("b_now", type_=_LEDGER.c.updated_at.type),
    )
)
# A key's outcome on its ledger row (binds `b_status`, `b_result`, `b_event`, `b_now`).
_OUTCOME = {
    "status": bindparam("b_status"),
    "result": bindparam("b_result", type_=_LEDGER.c.result.type),
    "event_id": bindparam("b_event"),
    "updated_at": bindparam("b_now", type_=_LEDGER.c.updated_at.type),
}
_LEDGER_FINISH = WithEvent(update(_LEDGER).where(_LEDGER.c.key == bindparam("k")).values(_OUTCOME))
# PostgreSQL, for a result whose transaction does not hold the saga yet: the saga's lock, the
# outcome and the result event in one statement. The ledger row waits for the saga's lock
# (`after_head`), so the locks come in `begin_effect`'s order: the saga, then the row.
_RESULT_EVENT = ChainedEvent("result_event")
_, _RESULT_WRITTEN = _RESULT_EVENT.ctes()
_LEDGER_FINISHED = (
    update(_LEDGER)
    .where(_LEDGER.c.key == bindparam("k"), _RESULT_EVENT.after_head())
    .values(_OUTCOME)
    .returning(_LEDGER.c.key)
    .cte("finished")
)
_LEDGER_FINISH_HOLDING = core_select(
    core_select(_LEDGER_FINISHED.c.key).exists(),  # first: the order is the gate's alone
    _RESULT_EVENT.head_of(),
    _RESULT_EVENT.hash_of(_RESULT_WRITTEN),
)
_USERS: Table = UserRow.__table__  # type: ignore[attr-defined]


def _approvers(column: Any) -> Any:
    """The approver's user row's `column`, read in the statement that consumes the approval."""
    return (
        core_select(column)
        .where(_USERS.c.id == _APPROVALS.c.approver_id)
        .correlate(_APPROVALS)
        .scalar_subquery()
    )


# Consumed once, atomically; what `lapse_reason` needs comes back with it (closed mode: any
# user at all; the approver's user row), so the approver is checked in the same round trip.
_CONSUME = (
    update(_APPROVALS)
    .where(
        _APPROVALS.c.id == bindparam("a"),
        _APPROVALS.c.consumed_at.is_(None),
        _APPROVALS.c.voided_at.is_(None),
        _APPROVALS.c.expires_at > bindparam("b_now", type_=_APPROVALS.c.expires_at.type),
    )
    .values(consumed_at=bindparam("b_now"), consumed_by=bindparam("b_exec"))
    .returning(
        _APPROVALS.c.approver_id,
        _APPROVALS.c.approver,
        core_select(_USERS.c.id).limit(1).scalar_subquery().label("any_user"),
        _approvers(_USERS.c.id).label("user_id"),
        _approvers(_USERS.c.active).label("active"),
        _approvers(_USERS.c.roles).label("roles"),
        _approvers(_USERS.c.display).label("display"),
    )
)
_CHECKPOINT_NEW_COLUMNS = ("saga_id", "event_id", "step", "state", "prev_hash", "hash", "created_at")
_CHECKPOINT_INSERT = insert(_CHECKPOINTS).values(_bound(_CHECKPOINTS, _CHECKPOINT_NEW_COLUMNS, "c_"))
_CHECKPOINT_NEW = WithEvent(_CHECKPOINT_INSERT)
_CHECKPOINT_HEAD = (
    core_select(_CHECKPOINTS.c.hash)
    .where(_CHECKPOINTS.c.saga_id == bindparam("saga_id"))
    .order_by(_CHECKPOINTS.c.seq.desc())
    .limit(1)
)
_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_LEDGER_COLUMNS = (
    _LEDGER.c.key,
    _LEDGER.c.tool,
    _LEDGER.c.saga_id,
    _LEDGER.c.args_digest,
    _LEDGER.c.status,
    _LEDGER.c.result,
    _LEDGER.c.attempts,
    _LEDGER.c.claimed_until,
)
_APPROVAL_COLUMNS = (
    _APPROVALS.c.id,
    _APPROVALS.c.saga_id,
    _APPROVALS.c.version,
    _APPROVALS.c.version_digest,
    _APPROVALS.c.destinations,
    _APPROVALS.c.session,
    _APPROVALS.c.approver,
    _APPROVALS.c.expires_at,
    _APPROVALS.c.token,
    _APPROVALS.c.consumed_by,
    _APPROVALS.c.voided_at,
)
# The latest approval issued for (saga, version digest): the one a call is authorized by.
_LATEST_APPROVAL = (
    core_select(_APPROVALS.c.id)
    .where(_APPROVALS.c.saga_id == bindparam("sid"), _APPROVALS.c.version_digest == bindparam("digest"))
    .order_by(_APPROVALS.c.issued_at.desc())
    .limit(1)
    .scalar_subquery()
)
# The authorization's three reads in one statement: each an outer join onto one row, so a
# missing ledger row, saga or approval (or an unbound key) reads as nulls.
_ONE_ROW = core_select(literal(1).label("one")).subquery("one_row")
_AUTHORIZATION_READS = core_select(
    *(c.label(f"ledger_{c.name}") for c in _LEDGER_COLUMNS),
    _SAGAS.c.id.label("saga_id"),
    _SAGAS.c.run.label("saga_run"),
    *(c.label(f"approval_{c.name}") for c in _APPROVAL_COLUMNS),
).select_from(
    _ONE_ROW.outerjoin(_LEDGER, _LEDGER.c.key == bindparam("k"))
    .outerjoin(_SAGAS, _SAGAS.c.id == bindparam("sid"))
    .outerjoin(_APPROVALS, _APPROVALS.c.id == _LATEST_APPROVAL)
)
# The same, taking the saga's lock and its chains' heads (`hold_chains`) along.
_AUTHORIZATION_READS_LOCKING = _AUTHORIZATION_READS.add_columns(
    func.pressroom_hold_chains(bindparam("lock", type_=String)).label("heads")
)
_LEDGER_VIEW = core_select(*_LEDGER_COLUMNS).where(_LEDGER.c.key == bindparam("k"))
_APPROVAL_VIEW = core_select(*_APPROVAL_COLUMNS).where(_APPROVALS.c.id == _LATEST_APPROVAL)
# PostgreSQL: the saga's lock and both its chains' heads (migration 0007).
_HOLD_CHAINS = core_select(func.pressroom_hold_chains(bindparam("saga_id", type_=String)))
_LOOSE_CHECKPOINT_HEAD = (
    core_select(_CHECKPOINTS.c.hash)
    .where(_CHECKPOINTS.c.saga_id.is_(None))
    .order_by(_CHECKPOINTS.c.seq.desc())
    .limit(1)
)


def approval_view(row: ApprovalRow) -> ApprovalView:
    return _approval(
        row.id,
        row.saga_id,
        row.version,
        row.version_digest,
        row.destinations,
        row.session,
        row.approver,
        row.expires_at,
        row.token,
        row.consumed_by,
        row.voided_at,
    )


def _approval(
    approval_id: str,
    saga_id: str,
    version: int,
    version_digest: str,
    destinations: list[str],
    session: str,
    approver: str,
    expires_at: datetime,
    token: str,
    consumed_by: str | None,
    voided_at: datetime | None,
) -> ApprovalView:
    """An approval's view from its columns, in `_APPROVAL_COLUMNS` order."""
    return ApprovalView(
        approval_id=approval_id,
        binding=ApprovalBinding(
            saga_id=saga_id,
            version=version,
            version_digest=version_digest,
            destinations=tuple(destinations),
            session=session,
            approver=approver,
            expires_at=aware(expires_at),
        ),
        token=token,
        consumed_by=consumed_by,
        voided=voided_at is not None,
    )


def _ledger(
    key: str,
    tool: str,
    saga_id: str | None,
    args_digest: str,
    status: str,
    result: dict[str, Any] | None,
    attempts: int,
    claimed_until: datetime | None,
) -> LedgerView:
    """A ledger row's view from its columns, in `_LEDGER_COLUMNS` order."""
    return LedgerView(
        key=key,
        tool=tool,
        saga_id=saga_id,
        args_digest=args_digest,
        status=status,
        result=result,
        attempts=attempts,
        claimed_until=claimed_until,
    )


def approval_row(binding: ApprovalBinding, token: str, *, issued_at: datetime) -> ApprovalRow:
    """The stored form of an issued approval (the inverse of `approval_view`)."""
    return ApprovalRow(
        saga_id=binding.saga_id,
        version=binding.version,
        version_digest=binding.version_digest,
        destinations=list(binding.destinations),
        session=binding.session,
        approver=binding.approver,
        issued_at=issued_at,
        expires_at=binding.expires_at,
        token=token,
    )


def aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class CallTx:
    """One pooled connection for one call: the authorization reads and the intent
    commit as its first transaction, the result as its second (invariant 4 holds:
    the first commits before the executor runs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.conn = writer(engine).connect()
        self._open: UnitOfWork | None = None

    def unit(self) -> UnitOfWork:
        """The open transaction, or a new one on the same connection."""
        if self._open is None:
            uow = UnitOfWork(self.engine)
            uow.session.close()
            uow.session = Session(bind=self.conn, expire_on_commit=False)
            self._open = uow
        return self._open

    def commit(self) -> None:
        uow, self._open = self._open, None
        if uow is not None:
            uow.session.commit()
            uow.session.close()
            uow.run_after_commit()

    def rollback(self) -> None:
        uow, self._open = self._open, None
        if uow is not None:
            uow.session.rollback()
            uow.session.close()

    def release(self) -> None:
        """Roll back whatever was left open (a refusal that wrote nothing) and return the connection."""
        self.rollback()
        self.conn.close()


@contextmanager
def call_unit(engine: Engine, tx: Any) -> Iterator[UnitOfWork]:
    """The call's transaction on its pinned connection when given, the caller's unit
    of work when one is given (it commits with the caller), else one of its own."""
    if isinstance(tx, UnitOfWork):
        yield tx
        return
    if not isinstance(tx, CallTx):
        with unit_of_work(engine) as uow:
            yield uow
        return
    uow = tx.unit()
    try:
        yield uow
    except BaseException:
        tx.rollback()
        raise
    tx.commit()


def read_for_authorization(
    s: Session, key: str | None, saga_id: str | None, version_digest: str | None, lock: str | None = None
) -> AuthorizationReads:
    """The key's ledger row, the saga's session and the approval for its version: one statement.
    With `lock` (PostgreSQL), the same statement takes that saga's lock and both its chains'
    heads (`hold_chains`), for the write the reads open."""
    params = {"k": key, "sid": saga_id, "digest": version_digest, "lock": lock}
    locking = lock is not None and s.connection().dialect.name == "postgresql"
    found = s.connection().execute(_AUTHORIZATION_READS_LOCKING if locking else _AUTHORIZATION_READS, params)
    values: tuple[Any, ...] = tuple(found.one())
    if locking:
        assert lock is not None
        _keep_heads(s, lock, values[-1])
    n, m = len(_LEDGER_COLUMNS), len(_APPROVAL_COLUMNS)
    ledger, (saga, run), approval = values[:n], values[n : n + 2], values[n + 2 : n + 2 + m]
    return AuthorizationReads(
        ledger=_ledger(*ledger) if ledger[0] is not None else None,
        saga_session=f"{saga}:{run}" if saga is not None else None,
        approval=_approval(*approval) if approval[0] is not None and version_digest is not None else None,
    )


def saga_session_of(s: Session, saga_id: str) -> str | None:
    saga = s.get(SagaRow, saga_id)
    return f"{saga.id}:{saga.run}" if saga else None


def approval_of(s: Session, saga_id: str, version_digest: str) -> ApprovalView | None:
    row = s.connection().execute(_APPROVAL_VIEW, {"sid": saga_id, "digest": version_digest}).first()
    return _approval(*row) if row else None


def ledger_row(s: Session, key: str) -> LedgerView | None:
    row = s.connection().execute(_LEDGER_VIEW, {"k": key}).first()
    return _ledger(*row) if row else None


def consume_approval(s: Session, approval_id: str, execution: str, now: datetime) -> None:
    """Consume once, atomically; the same execution may go on using it. Raises
    `ApprovalRefused`, or `ApproverLapsed` when its approver can no longer carry it
    (`lapse_reason`: in closed mode, an active user who still holds `reviewer`)."""
    conn = s.connection()
    taken = conn.execute(_CONSUME, {"a": approval_id, "b_now": now, "b_exec": execution}).first()
    _consumed(s, approval_id, execution, now, taken)


def _consumed(s: Session, approval_id: str, execution: str, now: datetime, taken: Any) -> None:
    """What `_CONSUME` returned (None: it consumed nothing), checked: see `consume_approval`."""
    if taken is not None and taken.approver is not None:
        user = (taken.active, taken.roles, taken.display) if taken.user_id is not None else None
        why = lapse_reason(taken.any_user is not None, user, taken.approver)
    else:
        why = approver_lapse(s, *_consumed_before(s, approval_id, execution, now))
    if why:
        raise ApproverLapsed(why, approval_id=approval_id)


def _consumed_before(s: Session, approval_id: str, execution: str, now: datetime) -> tuple[str | None, str]:
    """Not consumed now: the approver of one this execution consumed already, or why it is refused."""
    row = s.get(ApprovalRow, approval_id)
    if row is None:
        raise ApprovalRefused("approval not found", approval_id=approval_id)
    if row.voided_at is not None:
        raise ApprovalRefused("approval was voided", approval_id=approval_id)
    if row.consumed_at is None and aware(row.expires_at) <= now:
        raise ApprovalRefused("approval expired", approval_id=approval_id)
    if row.consumed_by != execution:
        raise ApprovalRefused("approval was already used by another execution", approval_id=approval_id)
    return row.approver_id, row.approver


def ledger_pending(
    s: Session, key: str, state: AgentState, saga_id: str | None, now: datetime, until: datetime
) -> None:
    """The key's ledger row `pending`, claimed until `until`: a new row, or a restartable one again."""
    conn = s.connection()
    # A concurrent first call of the same key waits here for the other's transaction: its
    # row, once committed, is read below (in flight); rolled back, this insert goes ahead.
    new = _ledger_values(key, state, saga_id, now, until)
    if conn.execute(_LEDGER_NEW[conn.dialect.name], new).first() is None:
        _ledger_known(s, key, state, now, until)


def _ledger_values(
    key: str, state: AgentState, saga_id: str | None, now: datetime, until: datetime
) -> dict[str, Any]:
    """A new ledger row's parameters for `_LEDGER_NEW`."""
    return {
        "l_key": key,
        "l_tool": state.tool,
        "l_saga_id": saga_id,
        "l_args_digest": state.args_digest,
        "l_status": LedgerStatus.PENDING.value,
        "l_attempts": 1,
        "l_claimed_until": until,
        "l_created_at": now,
        "l_updated_at": now,
    }


def _ledger_known(s: Session, key: str, state: AgentState, now: datetime, until: datetime) -> None:
    """The key has a row already: read it locked, and pend it again if it may restart."""
    conn = s.connection()
    args_digest, status, claimed_until = conn.execute(_LEDGER_HELD, {"k": key}).one()
    if args_digest != state.args_digest:
        raise IdempotencyConflict(f"key {key} was used with other arguments", key=key)
    if status == LedgerStatus.PENDING and claimed_until is not None and aware(claimed_until) > now:
        raise KeyInFlight(f"key {key} is in flight", key=key)
    if status not in RESTARTABLE:
        raise IdempotencyConflict(f"key {key} is {status}", key=key)
    conn.execute(_LEDGER_AGAIN, {"k": key, "b_until": until, "b_now": now})


def finish_ledger(
    s: Session, key: str, status: str, result: dict[str, Any] | None, event: dict[str, Any]
) -> str:
    """The key's outcome on its ledger row (none there: nothing to finish) and its result's
    `event` (`insert_event`'s fields), in one round trip on PostgreSQL; the event's id."""
    event_id: str = event.get("event_id") or new_id()
    values = {"k": key, "b_status": status, "b_result": result, "b_event": event_id, "b_now": utcnow()}
    saga_id = event.get("saga_id")
    if ChainedEvent.takes_chain(s, saga_id):
        # The saga is not held yet: the statement takes its lock first, then the row.
        linked = ChainedEvent.params(s, **{**event, "event_id": event_id})
        _finished, head, new_hash = s.connection().execute(_LEDGER_FINISH_HOLDING, {**values, **linked}).one()
        ChainedEvent.written(s, linked, head, new_hash)
        return event_id
    if saga_id is not None:
        hold_chain(s, saga_id)  # the saga before the ledger row, as begin_effect locks them
    _LEDGER_FINISH.execute(s, values, **{**event, "event_id": event_id})
    return event_id


def hold_chains(s: Session, saga_id: str) -> str:
    """`hold_chain` for a transaction that writes a checkpoint: the saga locked, its event head
    kept, and its checkpoint head returned (PostgreSQL: one round trip, migration 0007; none
    when this transaction's authorization reads took them)."""
    kept = held_heads(s, "checkpoints").get(saga_id)
    if kept is not None:
        return kept
    conn = s.connection()
    if conn.dialect.name != "postgresql":  # SQLite: the unit of work holds the write lock already
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
    s: Session, saga_id: str | None, state: AgentState, head: str | None, *, event: dict[str, Any]
) -> None:
    """The state before a side effect, chained onto the saga's last checkpoint (`head`, from
    `hold_chains`, or read now: the caller holds the saga's lock, so the chain cannot fork),
    and its intent `event`, in one round trip on PostgreSQL."""
    _CHECKPOINT_NEW.execute(s, _checkpoint_values(s, saga_id, state, head), **event)


def _checkpoint_values(
    s: Session, saga_id: str | None, state: AgentState, head: str | None
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
        "c_created_at": utcnow(),
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

    PostgreSQL: one statement. The five write five tables and none reads what another
    writes, so they are sub-statements of one (writable CTEs); its one row says which of the
    three that may refuse did not take, and those are settled as the statements one by one
    would have settled them (a refusal rolls everything back, so what ran beside it is
    undone). SQLite: one statement after another."""
    key = i.state.idempotency_key
    if i.charge is not None:
        refuse_over(s, i.charge)
    conn = s.connection()
    if conn.dialect.name != "postgresql":
        if i.charge is not None:
            charge_budget(s, i.charge)
        if i.approval_id is not None:
            consume_approval(s, i.approval_id, i.execution, i.now)
        if key:
            ledger_pending(s, key, i.state, i.saga_id, i.now, i.until)
        add_checkpoint(s, i.saga_id, i.state, i.head, event=i.event)
        return
    params = _checkpoint_values(s, i.saga_id, i.state, i.head)
    if i.charge is not None:
        params |= charge_params(i.charge, i.now)
    if i.approval_id is not None:
        params |= {"a": i.approval_id, "b_now": i.now, "b_exec": i.execution}
    if key:
        params |= _ledger_values(key, i.state, i.saga_id, i.now, i.until)
    statement = _intent_statement(i.charge, i.approval_id is not None, bool(key))
    row = statement.execute(s, params, **i.event).one()
    if i.charge is not None:
        charged(s, i.charge, (row.calls, row.tokens, row.cost))
    if i.approval_id is not None:
        _consumed(s, i.approval_id, i.execution, i.now, row)
    if key and row.ledgered is None:
        _ledger_known(s, key, i.state, i.now, i.until)


_INTENT_STATEMENTS: dict[tuple[bool | None, bool, bool], WithEvent] = {}


def _intent_statement(charge: Charge | None, consume: bool, ledger: bool) -> WithEvent:
    """`write_intent`'s statement on PostgreSQL, for what this intent writes (built once each)."""
    variant = (None if charge is None else charge.limit > 0, consume, ledger)
    found = _INTENT_STATEMENTS.get(variant)
    if found is not None:
        return found
    source: Any = _ONE_ROW
    columns: list[Any] = []
    if charge is not None:
        charged_cte = charge_statement("postgresql", charge).cte("charged")
        source = source.outerjoin(charged_cte, true())
        columns += [charged_cte.c.calls, charged_cte.c.tokens, charged_cte.c.cost]
    if consume:
        consumed = _CONSUME.cte("consumed")
        source = source.outerjoin(consumed, true())
        columns += [
            consumed.c[name]
            for name in ("approver_id", "approver", "any_user", "user_id", "active", "roles", "display")
        ]
    if ledger:
        ledgered = _LEDGER_NEW["postgresql"].cte("ledgered")
        source = source.outerjoin(ledgered, true())
        columns.append(ledgered.c.key.label("ledgered"))
    checkpoint = _CHECKPOINT_INSERT.cte("new_checkpoint")
    select_all = core_select(*(columns or [literal(1).label("one")])).select_from(source).add_cte(checkpoint)
    built = _INTENT_STATEMENTS[variant] = WithEvent(select_all)
    return built


__all__ = [
    "CallTx",
    "Intent",
    "add_checkpoint",
    "approval_of",
    "approval_row",
    "approval_view",
    "aware",
    "call_unit",
    "consume_approval",
    "finish_ledger",
    "hold_chains",
    "ledger_pending",
    "ledger_row",
    "read_for_authorization",
    "saga_session_of",
    "write_intent",
]

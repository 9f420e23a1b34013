"""Work in flight and its leases: the database, not the broker, holds the truth.

Every dispatched piece of work has a row with a lease deadline. A consumer
must take the lease before it works (a duplicate copy cannot take a lease
that is held) and completes the work in the same transaction as its state
change. A sweeper re-sends work whose lease ran out, up to a cap.

On PostgreSQL the claim skips a work row another transaction holds locked:
a consumer that takes the lease inside its final transaction (short work,
see `Consumer.handle`) holds the row lock while it works, and a duplicate copy
finds the lease held at once instead of waiting for that lock. Such a claim
becomes visible only when that transaction commits (or when the handler
defers or raises, which commits the lease). A consumer that dies inside it
leaves the row as it was before the delivery: the sweeper resends it once
its lease runs out, like a delivery the broker lost, and neither counts
towards the attempts cap (a backlog longer than the lease must not fail a
saga that was never worked on).

Every lease is dated, and judged, on the caller's clock (`now`), by default the database's
time as this process reads it (`utcnow`): never one host's wall clock against another's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Table, bindparam, or_, update
from sqlalchemy import select as core_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from orchestrator.store.adapter import adapter_for
from orchestrator.store.db import relaxed_commit, unit_of_work
from orchestrator.store.tables import WorkRow, utcnow


def new_work(
    session: Session,
    *,
    saga_id: str,
    task: str,
    queue: str,
    payload: dict[str, Any],
    lease: float,
    now: datetime | None = None,
) -> WorkRow:
    """A work row whose lease runs `lease` seconds from `now` (the caller's clock)."""
    row = WorkRow(
        saga_id=saga_id,
        task=task,
        queue=queue,
        payload=payload,
        lease_until=(now or utcnow()) + timedelta(seconds=lease),
    )
    session.add(row)
    return row


# The consumer's hot path: Core statements built once, run on the session's
# connection (no ORM bulk-update machinery, no per-call statement building).
_WORK: Table = WorkRow.__table__  # type: ignore[attr-defined]
_CLAIM_LEASE = (
    update(_WORK)
    .where(
        _WORK.c.id == bindparam("work_id"),
        _WORK.c.done_at.is_(None),
        or_(_WORK.c.holder.is_(None), _WORK.c.lease_until < bindparam("now")),
    )
    .values(holder=bindparam("new_holder"), lease_until=bindparam("until"), attempts=_WORK.c.attempts + 1)
    .returning(_WORK.c.attempts)
)
# PostgreSQL: the same claim, skipping a row locked by another transaction
# (a consumer working inside its claiming transaction) instead of waiting on it.
_CLAIMABLE = (
    core_select(_WORK.c.id)
    .where(
        _WORK.c.id == bindparam("work_id"),
        _WORK.c.done_at.is_(None),
        or_(_WORK.c.holder.is_(None), _WORK.c.lease_until < bindparam("now")),
    )
    .with_for_update(skip_locked=True)
    .scalar_subquery()
)
_CLAIM_LEASE_SKIP_LOCKED = (
    update(_WORK)
    .where(_WORK.c.id == _CLAIMABLE)
    .values(holder=bindparam("new_holder"), lease_until=bindparam("until"), attempts=_WORK.c.attempts + 1)
    .returning(_WORK.c.attempts)
)
# Work still open and held by `held_by`: what its completion and a renewal change.
_HELD = update(_WORK).where(
    _WORK.c.id == bindparam("work_id"), _WORK.c.holder == bindparam("held_by"), _WORK.c.done_at.is_(None)
)
COMPLETE = _HELD.values(done_at=bindparam("now"))
"""The completion (binds `work_id`, `held_by`, `now`); `outbox.inbox.settle` embeds it."""
_RENEW = _HELD.values(lease_until=bindparam("until"))
# Parked work: free to claim at once, its claim not counted; the sweeper's if nobody does by `until`.
_GIVE_BACK = _HELD.values(holder=None, lease_until=bindparam("until"), attempts=_WORK.c.attempts - 1)


def claim_lease(
    session: Session, work_id: str, holder: str, lease: float, *, now: datetime | None = None
) -> int | None:
    """In the caller's transaction: take the lease of unfinished work whose
    lease is free or ran out; the attempt number, or None when it is held, done,
    or (PostgreSQL) locked by a consumer working inside its claiming transaction.
    `now`: the caller's clock (default the database's time, `utcnow`)."""
    now = now or utcnow()
    conn = session.connection()
    statement = _CLAIM_LEASE_SKIP_LOCKED if adapter_for(conn).skips_locked else _CLAIM_LEASE
    taken = conn.execute(
        statement,
        {"work_id": work_id, "now": now, "new_holder": holder, "until": now + timedelta(seconds=lease)},
    ).first()
    return int(taken[0]) if taken is not None else None


def take_lease(engine: Engine, work_id: str, holder: str, lease: float) -> int | None:
    """`claim_lease` in a transaction of its own."""
    with unit_of_work(engine) as uow:
        return claim_lease(uow.session, work_id, holder, lease)


def renew_lease(
    engine: Engine, work_id: str, holder: str, lease: float, *, now: datetime | None = None
) -> bool:
    """Push the lease of work we hold `lease` seconds out from `now`; False when it is not ours
    (any more).

    Committed relaxed, as the lease's claim is: a renewal a crash loses lets the
    lease run out sooner, and the sweeper sends the work again."""
    return _change_held(engine, _RENEW, work_id, holder, lease, now)


def give_back(
    engine: Engine, work_id: str, holder: str, lease: float, *, now: datetime | None = None
) -> bool:
    """Let go of work we hold, unfinished, without counting the attempt; False when not ours.

    A parked delivery does this before it asks to be sent again (`outbox.consumer.Consumer`): the new
    copy can claim the lease at once. Should nothing send it, the sweeper does
    once `lease` seconds have passed. Committed relaxed: a give-back a crash
    loses leaves the lease held until it runs out, as if it had never happened."""
    return _change_held(engine, _GIVE_BACK, work_id, holder, lease, now)


def _change_held(
    engine: Engine, statement: Any, work_id: str, holder: str, lease: float, now: datetime | None = None
) -> bool:
    """Run a `_HELD` update with `until` `lease` seconds out, in a relaxed transaction of its own."""
    with unit_of_work(engine) as uow:
        relaxed_commit(uow.session)
        until = (now or utcnow()) + timedelta(seconds=lease)
        done = uow.session.connection().execute(
            statement, {"work_id": work_id, "held_by": holder, "until": until}
        )
        return done.rowcount == 1


def complete(session: Session, work_id: str, holder: str, *, now: datetime | None = None) -> bool:
    """Mark the work done, inside the consumer's transaction; False if not ours."""
    done = session.connection().execute(
        COMPLETE, {"work_id": work_id, "held_by": holder, "now": now or utcnow()}
    )
    return done.rowcount == 1


def abandon_open_work(session: Session, saga_id: str) -> None:
    session.execute(
        update(WorkRow)
        .where(col(WorkRow.saga_id) == saga_id, col(WorkRow.done_at).is_(None))
        .values(done_at=utcnow(), holder="abandoned")
    )


Resend = Callable[[Any, WorkRow], None]
Exhausted = Callable[[Any, WorkRow], None]


def queued_before_handles(session: Session, work_id: str, handoff: Mapping[str, Any]) -> bool:
    """Whether work `work_id` was queued by a release before capability handles: its row (which
    only the saga's own transactions write, never a message) records a handoff without a
    `handle`, for the saga, role, round and version `handoff` names. A message stripped of the
    handle its row records is not such work."""
    work = session.get(WorkRow, work_id)
    if work is None or work.payload.get("handle"):
        return False
    return all(
        work.payload.get(k) == handoff.get(k) for k in ("saga_id", "work_id", "role", "round", "version")
    )


def sweep_expired(
    engine: Engine,
    *,
    lease: float,
    max_attempts: int,
    resend: Resend,
    exhausted: Exhausted,
    now: datetime | None = None,
) -> int:
    """Re-send (or give up on) work whose lease ran out by `now`; the count handled."""
    now = now or utcnow()
    handled = 0
    with unit_of_work(engine) as uow:
        query = (
            select(WorkRow)
            .where(col(WorkRow.done_at).is_(None), col(WorkRow.lease_until) < now)
            .order_by(col(WorkRow.lease_until))
            .limit(100)
        )
        if adapter_for(engine).skips_locked:
            query = query.with_for_update(skip_locked=True)
        for row in uow.session.exec(query).all():
            if row.attempts >= max_attempts:
                row.done_at = now
                row.holder = "exhausted"
                uow.session.add(row)
                exhausted(uow, row)
            else:
                row.holder = None
                row.lease_until = now + timedelta(seconds=lease)
                uow.session.add(row)
                resend(uow, row)
            handled += 1
    return handled


__all__ = [
    "COMPLETE",
    "abandon_open_work",
    "claim_lease",
    "complete",
    "give_back",
    "new_work",
    "queued_before_handles",
    "renew_lease",
    "sweep_expired",
    "take_lease",
]

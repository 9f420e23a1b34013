"""Producing work: a work row with a lease and an outbox row, in the caller's unit of work.

`Dispatcher.dispatch` queues a task for a saga; `Dispatcher.resend` sends
existing work again (after its lease ran out, or when a parked delivery's
destination has a free turn). Either joins the saga's trace when no trace is
current, so one saga stays one trace whoever queued its work.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from sqlalchemy import Table, bindparam, inspect, select
from sqlalchemy.orm.util import identity_key
from sqlmodel import Session

from orchestrator.core.clock import DATABASE_TIME, Clock
from orchestrator.core.routing import queue_of
from orchestrator.harness.handles import Grant, encode
from orchestrator.store.db import UnitOfWork
from orchestrator.store.tables import SagaRow
from orchestrator.store.work import new_work
from outbox.messages import ArtifactRef, Handoff
from outbox.writer import Outbox
from telemetry import names
from telemetry.saga_trace import in_saga_trace


class Dispatcher:
    """Queues work through `outbox`; each work row's lease is `lease_seconds` long, from `clock`."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        lease_seconds: float,
        clock: Clock = DATABASE_TIME,
        signing_key: bytes | None = None,
    ) -> None:
        self.outbox = outbox
        self.lease_seconds = lease_seconds
        self.clock = clock
        # The server's key: a dispatch with a `grant` carries the handle minted and signed with it.
        self._key = signing_key

    def dispatch(
        self,
        uow: UnitOfWork,
        *,
        saga_id: str,
        task: str,
        artifacts: tuple[ArtifactRef, ...] = (),
        capabilities: tuple[str, ...] = (),
        version: int | None = None,
        version_digest: str | None = None,
        round: int = 0,
        note: str | None = None,
        role: str | None = None,
        uses_model: bool = False,
        grant: Grant | None = None,
    ) -> str:
        """Queue `task` for `saga_id`: a work row with a lease and an outbox row.

        With `grant`, the handoff carries the capability handle it mints (its id the work's,
        so every delivery of this work, a recovery's too, spends the same counts)."""
        queue = queue_of(task)
        work = new_work(
            uow.session,
            saga_id=saga_id,
            task=task,
            queue=queue,
            payload={},
            lease=self.lease_seconds,
            now=self.clock.now(),
        )
        handoff = Handoff(
            saga_id=saga_id,
            work_id=work.id,
            artifacts=artifacts,
            capabilities=capabilities,
            version=version,
            version_digest=version_digest,
            round=round,
            note=note,
            role=role,
            uses_model=uses_model,
            handle=self._handle(grant, work.id, saga_id),
        )
        work.payload = handoff.model_dump(mode="json")
        attrs: dict[str, Any] = {names.ATTR_SAGA_ID: saga_id}
        if version is not None:
            attrs[names.ATTR_VERSION] = version
        if version_digest:
            attrs[names.ATTR_VERSION_DIGEST] = version_digest
        if trace.get_current_span().get_span_context().is_valid:
            return self.outbox.add(
                uow, saga_id=saga_id, task=task, queue=queue, payload=work.payload, attributes=attrs
            )
        # A person's command (approve, reject, edit, reconcile): join the saga's trace.
        with joined_span(f"dispatch {task}", uow, saga_id):
            return self.outbox.add(
                uow, saga_id=saga_id, task=task, queue=queue, payload=work.payload, attributes=attrs
            )

    def _handle(self, grant: Grant | None, work_id: str, saga_id: str) -> str | None:
        if grant is None:
            return None
        if self._key is None:
            raise ValueError("a dispatcher without the signing key cannot mint a capability handle")
        return encode(grant.mint(handle_id=work_id, saga_id=saga_id, now=self.clock.now()), self._key)

    def resend(
        self, uow: UnitOfWork, task: str, payload: dict[str, Any], saga_id: str, *, why: str = "recover"
    ) -> str:
        """Send existing work again through the outbox: `recover` after its lease ran
        out, `resume` when a parked delivery's destination has a free turn."""
        with joined_span(f"{why} {task}", uow, saga_id):
            return self.outbox.add(
                uow,
                saga_id=saga_id,
                task=task,
                queue=queue_of(task),
                payload=payload,
                attributes={names.ATTR_SAGA_ID: saga_id},
            )


_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_TRACE_CONTEXT = select(_SAGAS.c.trace_context).where(_SAGAS.c.id == bindparam("saga_id"))


@contextmanager
def joined_span(name: str, uow: UnitOfWork, saga_id: str) -> Iterator[None]:
    """A span in the trace of a saga of this unit of work: its trace context as the session
    holds it when the saga is there, else read alone (after a flush, so that a saga added in
    this unit of work is found too)."""

    def carried() -> dict[str, str] | None:
        held = _held_trace_context(uow.session, saga_id)
        if held is not None:
            return held
        uow.session.flush()
        found: dict[str, str] | None = (
            uow.session.connection().execute(_TRACE_CONTEXT, {"saga_id": saga_id}).scalar()
        )
        return found

    with in_saga_trace(name, saga_id, carried):
        yield


def _held_trace_context(session: Session, saga_id: str) -> dict[str, str] | None:
    """The trace context of `saga_id` from the session's own copy of the saga, with no query:
    one this unit of work loaded (or flushed) and still holds, its column not expired. None
    when the session holds no such copy."""
    saga = session.identity_map.get(identity_key(SagaRow, saga_id))
    if not isinstance(saga, SagaRow) or "trace_context" in inspect(saga).unloaded:
        return None
    return dict(saga.trace_context or {})


__all__ = ["Dispatcher", "joined_span"]

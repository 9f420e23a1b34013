"""What a consumer runs for one message: a handler, and the finalizer it hands back.

A handler does its work (tool calls through the harness, each in its own
transactions) and returns a `Finalizer`, which the consumer runs inside the
transaction that records the message as applied and completes its work row.
Handlers get what they use from the composition root; nothing here knows it.

`holding_work_row()` marks the stretch where a handler runs inside the
transaction that holds its work row (the consumer's one-transaction path);
`inside_work_transaction()` lets a step that must not run there (a model
call) find out, and raise `LeaseFirst` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from orchestrator.harness.handles import Grant
from orchestrator.store.db import UnitOfWork
from outbox.messages import ArtifactRef, Handoff

Finalizer = Callable[[UnitOfWork], None]
# A unit-of-work factory: each call opens one unit of work (`store.db.unit_of_work`).
Transact = Callable[[], AbstractContextManager[UnitOfWork]]
# A handler gets the handoff and the lease holder (the message id).
Handler = Callable[[Handoff, str], Finalizer]


_HOLDING_WORK_ROW: ContextVar[bool] = ContextVar("pressroom_holding_work_row", default=False)


@contextmanager
def holding_work_row() -> Iterator[None]:
    """The handler run inside this block runs in the transaction that holds its work row."""
    token = _HOLDING_WORK_ROW.set(True)
    try:
        yield
    finally:
        _HOLDING_WORK_ROW.reset(token)


def inside_work_transaction() -> bool:
    """Whether this code runs inside a consumer's transaction that holds a work row."""
    return _HOLDING_WORK_ROW.get()


def noop(_uow: UnitOfWork) -> None:
    """A finalizer that changes nothing but still completes the work."""


class Dispatch(Protocol):
    """Queue a task for a saga inside the caller's unit of work (a work row plus an outbox row)."""

    def __call__(
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
    ) -> Any: ...


__all__ = [
    "Dispatch",
    "Finalizer",
    "Handler",
    "Transact",
    "holding_work_row",
    "inside_work_transaction",
    "noop",
]

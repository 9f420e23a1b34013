"""What a consumer runs for one message: a handler, and the finalizer it hands back.

A handler does its work (tool calls through the harness, each in its own
transactions) and returns a `Finalizer`, which the consumer runs inside the
transaction that records the message as applied and completes its work row.
Handlers get what they use from the composition root; nothing here knows it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from orchestrator.store.db import UnitOfWork
from outbox.messages import ArtifactRef, Handoff

Finalizer = Callable[[UnitOfWork], None]
# A unit-of-work factory: each call opens one unit of work (`store.db.unit_of_work`).
Transact = Callable[[], AbstractContextManager[UnitOfWork]]
# A handler gets the handoff and the lease holder (the message id).
Handler = Callable[[Handoff, str], Finalizer]


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
    ) -> Any: ...


__all__ = ["Dispatch", "Finalizer", "Handler", "Transact", "noop"]

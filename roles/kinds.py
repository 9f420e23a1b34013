"""The registry of role kinds: what each kind is called, where its work queues,
what it produces and which tools it may ever use.

A pipeline (`orchestrator.core.pipeline`) names kinds; a kind is one module
that builds a `RoleKind` and calls `register()` (the built-in ones are
registered by `roles.builtin_kinds`). The registry is data only: the turn a
kind runs is its `turn` function, called by the generic role handler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.pipeline import KindInfo, Produces
from orchestrator.core.routing import QUEUES


@dataclass(frozen=True)
class RoleKind:
    """One kind of role agent.

    `queue` is one of the fixed worker queues (`orchestrator.core.routing.QUEUES`):
    a new kind runs on an existing worker. `task` is its Celery task name,
    `pressroom.<queue>.<action>`. `capabilities` bound what any role of this kind
    may do, whatever its handoff asks for. `turn` does the kind's work for one
    handoff (see `roles.handlers`).
    """

    name: str
    queue: str
    task: str
    produces: Produces
    capabilities: frozenset[str]
    turn: Callable[..., Any] = field(compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.queue not in QUEUES or self.queue == "publisher":
            raise ValueError(f"role kind {self.name!r}: queue {self.queue!r} is not a role queue")
        if not self.task.startswith(f"pressroom.{self.queue}."):
            raise ValueError(f"role kind {self.name!r}: task {self.task!r} is not on queue {self.queue!r}")


_KINDS: dict[str, RoleKind] = {}


def register(kind: RoleKind) -> RoleKind:
    """Add `kind` (or replace the kind of that name: a test's own, for instance)."""
    for other in _KINDS.values():
        if other.task == kind.task and other.name != kind.name:
            raise ValueError(f"role kind {kind.name!r}: task {kind.task!r} belongs to {other.name!r}")
    _KINDS[kind.name] = kind
    return kind


def kinds() -> Mapping[str, RoleKind]:
    return dict(_KINDS)


def kind_infos() -> dict[str, KindInfo]:
    """What the pipeline parser needs of each registered kind."""
    return {name: KindInfo(name, kind.produces) for name, kind in _KINDS.items()}


def kind_for_task(task: str) -> RoleKind | None:
    return next((k for k in _KINDS.values() if k.task == task), None)


__all__ = ["RoleKind", "kind_for_task", "kind_infos", "kinds", "register"]

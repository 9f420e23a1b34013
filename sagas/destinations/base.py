"""The `Destination` port: publish by key, ask status by key, compensate by key.

Adapters raise `NotApplied` when the destination surely did not apply the
call and `MaybeApplied` when it may have (a timeout after the request left).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from orchestrator.core.config import Settings
    from sagas.destinations.webhook_urls import WebhookAllow


class PublishedVersion(BaseModel):
    """What a destination receives: one exact, approved version."""

    model_config = ConfigDict(frozen=True)

    saga_id: str
    version: int
    version_digest: str
    title: str
    slug: str
    markdown: str
    # Who approved this exact version (a git commit names them in a trailer).
    approver: str | None = None


class StatusAnswer(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["applied", "absent", "unknown"]
    receipt: dict[str, Any] | None = None
    detail: str = ""


@dataclass(frozen=True)
class OpenOptions:
    """What an adapter may need beyond its target, from the operator's settings.

    `link_hosts`: hosts a rendered `site:` page may link to; `webhook_allow`: the
    non-public hosts a `webhook:` may reach; `roots`: the folders a file destination
    must lie in at the effect; `settings`: the whole `Settings`, for a kind that
    reads its own (None where no settings apply, as in tests of one adapter).
    """

    link_hosts: frozenset[str] = frozenset()
    webhook_allow: WebhookAllow | None = None
    roots: Sequence[Path] = ()
    settings: Settings | None = None


class Destination(Protocol):
    """One publishing target, addressed by a URI such as `site:PATH`."""

    uri: str

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        """Apply the version under `key`; return the receipt. Idempotent per key."""
        ...

    def status(self, key: str) -> StatusAnswer:
        """Whether the publish under `key` is applied, absent, or unknown."""
        ...

    def compensate(self, key: str, receipt: dict[str, Any]) -> dict[str, Any] | None:
        """Undo the publish under `key`; done when already undone. An irreversible kind
        (one whose class says `reversible = False`) sends a correction instead and
        returns its receipt (`"kind": "correction"`); an undo returns None."""
        ...


__all__ = ["Destination", "OpenOptions", "PublishedVersion", "StatusAnswer"]

"""The `Destination` port: publish by key, ask status by key, compensate by key.

Adapters raise `NotApplied` when the destination surely did not apply the
call and `MaybeApplied` when it may have (a timeout after the request left).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict


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


class Destination(Protocol):
    """One publishing target, addressed by a URI such as `site:PATH`."""

    uri: str

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        """Apply the version under `key`; return the receipt. Idempotent per key."""
        ...

    def status(self, key: str) -> StatusAnswer:
        """Whether the publish under `key` is applied, absent, or unknown."""
        ...

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        """Undo the publish under `key`; done when already undone."""
        ...


__all__ = ["Destination", "PublishedVersion", "StatusAnswer"]

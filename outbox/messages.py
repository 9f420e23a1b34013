"""Messages that cross the broker: handoffs name artifacts, never chat history."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.harness.handles import MAX_TOKEN


class ArtifactRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str
    digest: str


class Handoff(BaseModel):
    """The body of every role message.

    Fields it does not know are ignored: during a rolling upgrade a worker of the
    earlier release takes messages the later one sent, and a field added later
    must mean, when ignored, what the earlier release does (docs/deploy.md,
    "Rolling upgrades"). A known field of the wrong type is still refused.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    saga_id: str
    work_id: str
    artifacts: tuple[ArtifactRef, ...] = ()
    # Names only, kept readable for earlier releases: authority comes from `handle`.
    capabilities: tuple[str, ...] = ()
    # The signed capability handle the coordinator minted for this work
    # (`orchestrator.harness.handles`); None from a release before handles.
    handle: str | None = Field(default=None, max_length=MAX_TOKEN)
    version: int | None = None
    version_digest: str | None = None
    round: int = 0
    note: str | None = Field(default=None, max_length=500)
    # The pipeline role this work is for (None: the kind's own name, as in messages
    # sent before pipelines), and whether its planner calls a model: such work never
    # runs inside an open transaction (`Consumer.folds_lease`).
    role: str | None = Field(default=None, max_length=40)
    uses_model: bool = False


class Envelope(BaseModel):
    """An outbox row as the broker adapter sees it."""

    model_config = ConfigDict(frozen=True)

    message_id: str
    task: str
    queue: str
    payload: dict[str, Any]
    headers: dict[str, str] = {}


__all__ = ["ArtifactRef", "Envelope", "Handoff"]

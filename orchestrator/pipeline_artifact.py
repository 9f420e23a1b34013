"""A saga's pipeline, stored at submit as an artifact of kind `pipeline`.

The saga runs the pipeline as it was when it was submitted, whatever happens
to the file later: the body is `pipeline.model_dump(mode="json",
by_alias=True)` (so `Pipeline.model_validate(body)` reads it back), and the
artifact's digest, the sha256 of that body's canonical JSON, is the saga's
`pipeline_digest`. Artifacts are content-addressed: sagas that run the same
pipeline share one row.
"""

from __future__ import annotations

from pydantic import ConfigDict
from sqlmodel import Session

from orchestrator.core.pipeline import Pipeline
from roles.artifacts import Artifact
from roles.tools import store_artifact

KIND = "pipeline"


class PipelineArtifact(Artifact):
    """The dumped pipeline as an `Artifact`: its fields are the dump's keys, kept as they are."""

    model_config = ConfigDict(frozen=True, extra="allow")

    @classmethod
    def of(cls, pipeline: Pipeline) -> PipelineArtifact:
        return cls.model_validate(pipeline.model_dump(mode="json", by_alias=True))


def store_pipeline(session: Session, saga_id: str, pipeline: Pipeline) -> str:
    """Store `pipeline` for the saga `saga_id` (already flushed); its digest."""
    return store_artifact(session, saga_id, KIND, PipelineArtifact.of(pipeline))


__all__ = ["KIND", "PipelineArtifact", "store_pipeline"]

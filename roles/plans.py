"""A saga's pipeline and its plan: what `sagas.preparation` decides over.

A saga runs the pipeline stored with it at submit (an artifact of kind
`pipeline`, immutable, so one process parses each once), or the shipped
`default` when it has none (a saga from before pipelines). Its plan is its
roles as the decider sees them: each with what its registered kind produces.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from sqlmodel import Session

from orchestrator.core.errors import InvalidInput
from orchestrator.core.pipeline import Pipeline, RoleDecl, parse_pipeline
from orchestrator.store.tables import SagaRow
from roles.kinds import RoleKind, kind_infos, kinds
from roles.tools import load_artifact
from sagas.preparation import Node

SHIPPED_DEFAULT = Path(__file__).resolve().parent / "pipelines" / "default.toml"
PIPELINES_REMEMBERED = 256
_PIPELINES: dict[str, Pipeline] = {}


@lru_cache(maxsize=1)
def default_pipeline() -> Pipeline:
    """The pipeline the project ships as `default`: a saga whose `pipeline_digest` is null runs it."""
    text = SHIPPED_DEFAULT.read_text(encoding="utf-8")
    return parse_pipeline("default", text, source=str(SHIPPED_DEFAULT), kinds=kind_infos())


def saga_pipeline(session: Session, saga: SagaRow) -> Pipeline:
    """The pipeline `saga` runs: its `pipeline` artifact, or the shipped default."""
    digest = saga.pipeline_digest
    if digest is None:
        return default_pipeline()
    found = _PIPELINES.get(digest)
    if found is None:
        found = Pipeline.model_validate(load_artifact(session, digest))
        if len(_PIPELINES) >= PIPELINES_REMEMBERED:
            _PIPELINES.pop(next(iter(_PIPELINES)), None)
        _PIPELINES[digest] = found
    return found


def kind_of(pipeline: Pipeline, role: RoleDecl) -> RoleKind:
    """The registered kind of `role`; refused when this process does not know it."""
    kind = kinds().get(role.kind)
    if kind is None:
        raise InvalidInput(
            f"the pipeline {pipeline.name!r} names the role kind {role.kind!r} (role {role.name!r}), "
            "which this process has not registered"
        )
    return kind


def plan_of(pipeline: Pipeline) -> tuple[Node, ...]:
    """The pipeline's roles as the decider sees them, in declaration order."""
    return tuple(Node(r.name, kind_of(pipeline, r).produces, r.after) for r in pipeline.roles)


__all__ = ["SHIPPED_DEFAULT", "default_pipeline", "kind_of", "plan_of", "saga_pipeline"]

"""Which planner a role gets, and, for a model-backed role, its goal, instructions and tools.

The deterministic planners (`roles.planners`) stay the default. A pipeline
role whose `planner` names a `[model.NAME]` profile gets a `ModelPlanner`
(`roles.model_turn`) from `model_planner_for(kind, role, pipeline, chat, ...)`:

- tools, by what the kind produces (the model-role contract's lists): a
  researcher `corpus.search`, `corpus.read` and `evidence.record`; a writer
  `draft.write`; a reviewer `corpus.read` and `review.record`; only those the
  registry holds, that are not `deny` and that the kind's capabilities allow
  (what the model may be shown is never more than what the harness lets it do);
- the result tool, whose ok answer ends the turn: `evidence.record`,
  `draft.write`, `review.record`;
- the goal (`roles.model_goals`), read from the saga: its brief; a writer's
  evidence notes, the review's findings and a person's note; a reviewer's
  version, as numbered sentences with their citations.

`chat` is any `ChatModel`: the role handler passes a `DurableChat` around
`chat_for(profile)`, so every call is recorded, replayed and budgeted.

`PRESSROOM_MODEL` keeps working for the writer: `planner_for()` (the
factory the role handlers call) gives the writer a model planner for the
profile `settings_profile()` makes of the settings, named `settings`, and
`with_settings_model()` puts that profile into a pipeline for its writers.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Final, Protocol

from sqlalchemy.engine import Engine
from sqlmodel import Session

from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput
from orchestrator.core.pipeline import DETERMINISTIC, ModelProfile, Pipeline, Produces, RoleDecl
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.ports import Planner
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import Risk, ToolSpec
from roles.artifacts import Citation, Evidence, Finding
from roles.kinds import RoleKind, kinds
from roles.llm_client import ChatModel, open_chat
from roles.model_goals import Goal, base_goal, instructions, researcher_goal, reviewer_goal, writer_goal
from roles.model_turn import (
    DATA_NOTICE,
    MAX_CONVERSATION_CHARS,
    MAX_EXCHANGES,
    MAX_RESULT_CHARS,
    SEVERAL_CALLS,
    ModelPlanner,
    frame,
    tool_schema,
)
from roles.planners import WriterPlanner
from roles.tools import load_artifact
from sagas import records

# The tools a role is offered, and the one whose ok answer is its result, by what its kind produces.
ROLE_TOOLS: Final[dict[str, tuple[str, ...]]] = {
    "evidence": ("corpus.search", "corpus.read", "evidence.record"),
    "version": ("draft.write",),
    "verdict": ("corpus.read", "review.record"),
}
RESULT_TOOLS: Final[dict[str, str]] = {
    "evidence": "evidence.record",
    "version": "draft.write",
    "verdict": "review.record",
}
BUILTIN: Final[dict[str, Produces]] = {"researcher": "evidence", "writer": "version", "reviewer": "verdict"}
# The profile `PRESSROOM_MODEL` becomes.
SETTINGS_PROFILE: Final = "settings"
SETTINGS_KEY_VARIABLE: Final = "PRESSROOM_MODEL_API_KEY"


class RolePlanner(Planner, Protocol):
    """A planner whose finished turn leaves the role's result (a tool's output) behind."""

    result: dict[str, Any] | None


def model_planner_for(
    kind: RoleKind | str,
    role: RoleDecl,
    pipeline: Pipeline,
    chat: ChatModel,
    *,
    registry: Registry,
    engine: Engine,
    saga_id: str,
    round: int = 0,
    evidence_digest: str | None = None,
    review_digest: str | None = None,
    note: str | None = None,
    version: int | None = None,
    extra_tools: Sequence[ToolSpec] = (),
) -> ModelPlanner:
    """The model planner of `role` (of kind `kind`) for one turn on `saga_id`; `extra_tools`
    are offered beside the kind's own (the role's MCP tools, `roles.mcp_turn`).

    A writer needs `evidence_digest` (and is given `round`, `review_digest`
    and `note` as its handoff holds them); a reviewer reviews `version` (the
    saga's head when None). Raises `InvalidInput` when the role names no model
    profile of `pipeline`, and `NotFound` for a saga, artifact or version that
    is not there.
    """
    if pipeline.profile(role) is None:
        raise InvalidInput(f"role {role.name!r} of pipeline {pipeline.name!r} names no model profile")
    return _planner(
        kind,
        role.name,
        chat,
        registry=registry,
        engine=engine,
        saga_id=saga_id,
        round=round,
        evidence_digest=evidence_digest,
        review_digest=review_digest,
        note=note,
        version=version,
        extra_tools=extra_tools,
    )


def planner_for(
    role: str,
    settings: Settings,
    default: RolePlanner,
    *,
    registry: Registry,
    chat: ChatModel | None = None,
    engine: Engine | None = None,
) -> RolePlanner:
    """`default` (deterministic), unless `PRESSROOM_MODEL` is set and `default` is the writer's:
    then the writer's model planner (role name `writer`), asking `chat` (default: the
    settings' client). `engine` is where the goal is read; without one, the settings'
    database is opened once per process (until every caller passes its own)."""
    if not settings.model or role != "writer" or not isinstance(default, WriterPlanner):
        return default
    args: dict[str, Any] = dict(default.args)
    return _planner(
        "writer",
        "writer",
        chat or open_chat(settings),
        registry=registry,
        engine=engine or _database(settings.database_url),
        saga_id=str(args["saga_id"]),
        round=int(args.get("round") or 0),
        evidence_digest=args.get("evidence_digest"),
        review_digest=args.get("review_digest"),
        note=args.get("note"),
    )


def settings_profile(settings: Settings) -> ModelProfile | None:
    """The model profile `PRESSROOM_MODEL` (with its base URL and key variable) describes; None unset."""
    if not settings.model:
        return None
    key = SETTINGS_KEY_VARIABLE if settings.model_api_key else None
    return ModelProfile(model=settings.model, base_url=settings.model_base_url, api_key_env=key)


def with_settings_model(pipeline: Pipeline, settings: Settings) -> Pipeline:
    """`pipeline` with its deterministic writers planned by the settings' model (profile
    `settings`), when `PRESSROOM_MODEL` is set; `pipeline` itself otherwise."""
    profile = settings_profile(settings)
    if profile is None:
        return pipeline
    roles = tuple(
        r.model_copy(update={"planner": SETTINGS_PROFILE})
        if r.planner == DETERMINISTIC and _produces(r.kind) == "version"
        else r
        for r in pipeline.roles
    )
    if roles == pipeline.roles:
        return pipeline
    return pipeline.model_copy(
        update={"roles": roles, "models": {**pipeline.models, SETTINGS_PROFILE: profile}}
    )


def tools_for(kind: RoleKind | str, registry: Registry) -> list[ToolSpec]:
    """The specs a role of `kind` is offered: the contract's for what it produces, held by the
    registry, not `deny`, and within the kind's capabilities."""
    _, produces, allowed = _kind(kind)
    wanted = ROLE_TOOLS.get(produces, ())
    found = [registry.get(tool) for tool in wanted]
    return [s for s in found if s is not None and s.risk is not Risk.DENY and s.needed_capability in allowed]


def _planner(
    kind: RoleKind | str,
    role_name: str,
    chat: ChatModel,
    *,
    registry: Registry,
    engine: Engine,
    saga_id: str,
    round: int,
    evidence_digest: str | None,
    review_digest: str | None,
    note: str | None,
    version: int | None = None,
    extra_tools: Sequence[ToolSpec] = (),
) -> ModelPlanner:
    name, produces, _ = _kind(kind)
    goal = _goal(
        name,
        produces,
        role_name,
        engine,
        saga_id=saga_id,
        round=round,
        evidence_digest=evidence_digest,
        review_digest=review_digest,
        note=note,
        version=version,
    )
    return ModelPlanner(
        role=name,
        system=instructions(name, role_name, produces, goal.left_out),
        goal=goal.body,
        tools=[*tools_for(kind, registry), *extra_tools],
        chat=chat,
        result_tool=RESULT_TOOLS.get(produces),
    )


def _goal(
    kind: str,
    produces: Produces,
    role_name: str,
    engine: Engine,
    *,
    saga_id: str,
    round: int,
    evidence_digest: str | None,
    review_digest: str | None,
    note: str | None,
    version: int | None,
) -> Goal:
    """The role's goal, read from the saga's records (one read-only session)."""
    with Session(engine) as s:
        saga = records.load_saga(s, saga_id)
        base = base_goal(kind, role_name, saga.id, saga.brief)
        if produces == "evidence":
            return researcher_goal(base)
        if produces == "version":
            if evidence_digest is None:
                raise InvalidInput(
                    f"the {kind} role {role_name!r} has no evidence to write from", saga_id=saga_id
                )
            evidence = Evidence.model_validate(load_artifact(s, evidence_digest))
            findings = []
            if review_digest:
                findings = [Finding.model_validate(f) for f in load_artifact(s, review_digest)["findings"]]
            return writer_goal(
                base,
                evidence_digest=evidence_digest,
                round=round,
                evidence=evidence,
                findings=findings,
                note=note,
                review_digest=review_digest,
            )
        row = records.version(s, saga.id, version or saga.head_version)
        return reviewer_goal(
            base,
            version=row.number,
            version_digest=row.digest,
            markdown=row.markdown,
            citations=[Citation.model_validate(c) for c in row.citations],
        )


def _kind(kind: RoleKind | str) -> tuple[str, Produces, frozenset[str]]:
    """A kind's name, what it produces and its capabilities (a registered kind, or a built-in one)."""
    if isinstance(kind, RoleKind):
        return kind.name, kind.produces, kind.capabilities
    registered = kinds().get(kind)
    if registered is not None:
        return registered.name, registered.produces, registered.capabilities
    if kind in BUILTIN:
        return kind, BUILTIN[kind], ROLE_CAPABILITIES[kind]
    raise InvalidInput(f"unknown role kind {kind!r}")


def _produces(kind: str) -> Produces | None:
    try:
        return _kind(kind)[1]
    except InvalidInput:
        return None


@lru_cache(maxsize=4)
def _database(url: str) -> Engine:
    from orchestrator.store.db import make_engine

    return make_engine(url, upgrade=False)


__all__ = [
    "DATA_NOTICE",
    "MAX_CONVERSATION_CHARS",
    "MAX_EXCHANGES",
    "MAX_RESULT_CHARS",
    "RESULT_TOOLS",
    "ROLE_TOOLS",
    "SETTINGS_PROFILE",
    "SEVERAL_CALLS",
    "ModelPlanner",
    "RolePlanner",
    "frame",
    "model_planner_for",
    "planner_for",
    "settings_profile",
    "tool_schema",
    "tools_for",
    "with_settings_model",
]

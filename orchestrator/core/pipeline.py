"""Declared pipelines: which roles prepare a saga, in what order, with which
planner and budget (DESIGN.md, "Pipelines and models"). No I/O.

A pipeline is parsed from TOML text by `parse_pipeline`, given the role kinds
the process knows (`KindInfo`: what each kind produces). Anything wrong is an
`InvalidPipeline` whose message is one line naming the file and the field, so
`pressroom pipelines show` and `submit --pipeline` can print it as it is.

What a kind produces is what the preparation decider (`sagas.preparation`)
needs to know of it:

* `evidence`: notes taken from the corpus (the researcher);
* `version`: a new version of the document (the writer);
* `verdict`: a pass or fail on the head version (the reviewer).

Roles run after the roles they name in `after`, which must be declared before
them, so a pipeline is a DAG in declaration order. Reviewers after the same
role run in parallel, and all must pass.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.core.errors import InvalidInput

DETERMINISTIC = "deterministic"
NAME = r"^[a-z][a-z0-9_-]{0,39}$"
Produces = Literal["evidence", "version", "verdict"]
Risk = Literal["read_only", "reversible_write", "high_risk", "deny"]


class InvalidPipeline(InvalidInput):
    """A pipeline that cannot be used: one line naming the file and the field (exit 2)."""


@dataclass(frozen=True)
class KindInfo:
    """What the pipeline parser knows of a registered role kind."""

    name: str
    produces: Produces


class Budget(BaseModel):
    """A ceiling on model use: tokens (in and out) and cost in USD; either may be absent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0)


class ModelProfile(BaseModel):
    """An OpenAI-compatible chat-completions endpoint and how to call it.

    The key is never in the file: `api_key_env` names the variable it is read
    from when the call is made.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, max_length=2000)
    model: str = Field(min_length=1, max_length=200)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = None
    max_tokens: int = Field(default=2000, ge=1, le=1_000_000)
    price_in: float = Field(default=0.0, ge=0.0, description="USD per million input tokens")
    price_out: float = Field(default=0.0, ge=0.0, description="USD per million output tokens")
    timeout: float = Field(default=60.0, gt=0.0, le=3600.0, description="seconds per request")
    max_retries: int = Field(default=3, ge=0, le=10, description="retries of a 429, 5xx or timeout")
    concurrency: int = Field(default=32, ge=1, le=4096, description="requests in flight per process")
    requests_per_minute: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="requests started per minute per process (None: unlimited)",
    )
    tokens_per_minute: int | None = Field(
        default=None, ge=1, le=1_000_000_000, description="tokens per minute per process (None: unlimited)"
    )


class McpServer(BaseModel):
    """An MCP server whose tools roles may use: a stdio command or a streamable-HTTP URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    url: str | None = None
    token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    risk: dict[str, Risk] = Field(default_factory=dict)
    connect_timeout: float = Field(default=10.0, gt=0.0, le=300.0, description="seconds to connect and list")
    call_timeout: float = Field(default=10.0, gt=0.0, le=3600.0, description="seconds per tool call")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` and `url`")
        return self


class RoleDecl(BaseModel):
    """One role of a pipeline, as declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME)
    kind: str = Field(pattern=NAME)
    after: tuple[str, ...] = ()
    planner: str = Field(default=DETERMINISTIC, pattern=NAME)
    budget: Budget | None = None
    tools: tuple[str, ...] = ()

    @property
    def uses_model(self) -> bool:
        return self.planner != DETERMINISTIC


class Pipeline(BaseModel):
    """A parsed, checked pipeline; `roles` in declaration order (a topological order)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(pattern=NAME)
    description: str | None = Field(default=None, max_length=500)
    roles: tuple[RoleDecl, ...] = Field(alias="role", min_length=1, max_length=32)
    models: dict[str, ModelProfile] = Field(default_factory=dict, alias="model")
    mcp: dict[str, McpServer] = Field(default_factory=dict)
    budget: Budget | None = Field(default=None, description="per saga, over every role")

    def role(self, name: str) -> RoleDecl:
        for role in self.roles:
            if role.name == name:
                return role
        raise KeyError(name)

    def profile(self, role: RoleDecl) -> ModelProfile | None:
        return self.models.get(role.planner) if role.uses_model else None


def parse_pipeline(name: str, text: str, *, source: str, kinds: Mapping[str, KindInfo]) -> Pipeline:
    """The pipeline `name` from TOML `text` (read from `source`, named in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidPipeline(f"{source}: not TOML: {exc}") from None
    try:
        pipeline = Pipeline.model_validate({"name": name, **data})
    except ValidationError as exc:
        raise InvalidPipeline(f"{source}: {_first_error(exc)}") from None
    problem = _problem(pipeline, kinds)
    if problem:
        raise InvalidPipeline(f"{source}: {problem}")
    return pipeline


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ""
    for part in error["loc"]:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return f"{where or 'pipeline'}: {error['msg']}"


def _problem(pipeline: Pipeline, kinds: Mapping[str, KindInfo]) -> str | None:
    """The first thing that makes a well-typed pipeline unusable, or None."""
    seen: dict[str, RoleDecl] = {}
    for i, role in enumerate(pipeline.roles):
        field = f"role[{i}]"
        if role.name in seen:
            return f"{field}.name: the role {role.name!r} is declared twice"
        if role.kind not in kinds:
            known = ", ".join(sorted(kinds))
            return f"{field}.kind: unknown role kind {role.kind!r} (known: {known})"
        for before in role.after:
            if before not in seen:
                return f"{field}.after: {before!r} is not a role declared before {role.name!r}"
        if role.uses_model and role.planner not in pipeline.models:
            return f"{field}.planner: no [model.{role.planner}] profile"
        for tool in role.tools:
            if problem := _tool_problem(pipeline, tool):
                return f"{field}.tools: {problem}"
        produces = kinds[role.kind].produces
        upstream = _upstream(role, seen)
        if produces == "version" and not any(kinds[r.kind].produces == "evidence" for r in upstream):
            return f"{field}.after: the writer role {role.name!r} needs a research role before it"
        if produces == "verdict" and not any(kinds[r.kind].produces == "version" for r in upstream):
            return f"{field}.after: the reviewer role {role.name!r} needs a writer role before it"
        seen[role.name] = role
    if not any(kinds[r.kind].produces == "version" for r in pipeline.roles):
        return "role: the pipeline has no writer role (a role whose kind writes a version)"
    return None


def _tool_problem(pipeline: Pipeline, tool: str) -> str | None:
    if not tool.startswith("mcp:") or "/" not in tool:
        return f"{tool!r} is not of the form mcp:SERVER/TOOL"
    server, _, name = tool[4:].partition("/")
    if server not in pipeline.mcp:
        return f"{tool!r} names no [mcp.{server}] server"
    if not name:
        return f"{tool!r} names no tool"
    return None


def _upstream(role: RoleDecl, seen: Mapping[str, RoleDecl]) -> list[RoleDecl]:
    """Every role `role` runs after, directly or not."""
    found: dict[str, RoleDecl] = {}
    stack = list(role.after)
    while stack:
        name = stack.pop()
        if name not in found:
            found[name] = seen[name]
            stack.extend(seen[name].after)
    return list(found.values())


__all__ = [
    "DETERMINISTIC",
    "Budget",
    "InvalidPipeline",
    "KindInfo",
    "McpServer",
    "ModelProfile",
    "Pipeline",
    "Produces",
    "RoleDecl",
    "parse_pipeline",
]

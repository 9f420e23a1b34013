"""Pipelines whose roles a scripted model plans, for the end-to-end tests of model-backed roles.

`pipeline_toml(url, roles)` writes a pipeline whose model roles name the profile
`house`: the scripted server's URL, a key read from `KEY_VARIABLE`, `seed = 7`
and prices, so a test can check what the calls cost. `Role` declares one role
(on the model unless `model=False`, with an optional token budget).

`strict_reviewer(folder)` writes a role kind from another package (a module and
the metadata of a distribution that declares it under `pressroom.role_kinds`):
`strict`, a reviewer that requests changes of every version it reads, for the
parallel-reviewers test. `Rows` reads a test's database (SQLite or PostgreSQL)
with plain SQL, so the checks read what the product wrote, not what it says.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

PROFILE: Final = "house"
MODEL: Final = "house-model"
KEY_VARIABLE: Final = "HOUSE_API_KEY"
KEY: Final = "sk-house-e2e-0123456789"
SEED: Final = 7
PRICE_IN: Final = 0.5  # USD per million input tokens
PRICE_OUT: Final = 1.5  # USD per million output tokens
STRICT_RULE: Final = "strict-first-citation"


@dataclass(frozen=True)
class Role:
    """One role of a pipeline: planned by the `house` profile unless `model` is False."""

    name: str
    kind: str
    after: tuple[str, ...] = ()
    model: bool = True
    tokens: int | None = None


# research -> draft -> check, every one on the model.
ALL_ON_MODEL: Final = (
    Role("research", "researcher"),
    Role("draft", "writer", ("research",)),
    Role("check", "reviewer", ("draft",)),
)


def pipeline_toml(url: str, roles: Sequence[Role], *, description: str = "") -> str:
    """The TOML of a pipeline of `roles`, its model roles on the scripted model at `url`."""
    parts = [f"description = {json.dumps(description or 'roles on the scripted model')}\n"]
    for role in roles:
        lines = ["[[role]]", f'name = "{role.name}"', f'kind = "{role.kind}"']
        if role.after:
            lines.append(f"after = {json.dumps(list(role.after))}")
        lines.append(f'planner = "{PROFILE if role.model else "deterministic"}"')
        if role.tokens is not None:
            lines.append(f"budget = {{ tokens = {role.tokens} }}")
        parts.append("\n".join(lines) + "\n")
    parts.append(
        f"[model.{PROFILE}]\n"
        f'base_url = "{url}"\n'
        f'model = "{MODEL}"\n'
        f'api_key_env = "{KEY_VARIABLE}"\n'
        "temperature = 0.0\n"
        f"seed = {SEED}\n"
        "max_tokens = 1500\n"
        f"price_in = {PRICE_IN}\n"
        f"price_out = {PRICE_OUT}\n"
    )
    return "\n".join(parts)


def write_pipelines(folder: Path, url: str, pipelines: Mapping[str, Sequence[Role]]) -> Path:
    """Each pipeline of `pipelines` (name -> roles) as `folder/NAME.toml`; `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, roles in pipelines.items():
        (folder / f"{name}.toml").write_text(pipeline_toml(url, roles), encoding="utf-8")
    return folder


def cost(tokens_in: int, tokens_out: int) -> float:
    """What the tokens cost at the profile's prices."""
    return (tokens_in * PRICE_IN + tokens_out * PRICE_OUT) / 1_000_000


STRICT_PLUGIN: Final = '''
"""A strict reviewer: requests changes of every version, with a finding on its first citation."""

import uuid

from sqlmodel import Session

from orchestrator.harness.spec import ToolCall
from roles.artifacts import Finding, ReviewReport
from roles.kinds import RoleKind, register
from roles.rounds import Outcome
from roles.tools import store_artifact
from roles.turn import run_planner
from sagas import records

RULE = "{rule}"


class ReadOnce:
    def __init__(self, saga_id, source):
        self.arguments = {{"saga_id": saga_id, "source": source}}

    def propose(self, transcript):
        if transcript:
            return None
        return ToolCall(tool="corpus.read", arguments=self.arguments, call_id=uuid.uuid4().hex)


def turn(ctx):
    with Session(ctx.ports.engine) as s:
        version = records.version(s, ctx.saga_id, ctx.handoff.version)
    first = version.citations[0]
    loop = run_planner(ctx, ReadOnce(ctx.saga_id, first["source"]))
    if failed := loop.failed("strict"):
        return failed
    finding = Finding(rule=RULE, location=f"citation {{first['marker']}}", message="never good enough")
    report = ReviewReport(
        verdict="changes_requested",
        findings=(finding,),
        checked_citations=len(version.citations),
        version_digest=version.digest,
    )

    def write(s, saga):
        return Outcome.done(store_artifact(s, saga.id, "review", report), "fail")

    return loop.then(write)


register(RoleKind("strict", "reviewer", "pressroom.reviewer.strict", "verdict", frozenset({{"corpus.read"}}), turn))
'''


def strict_reviewer(folder: Path) -> Path:
    """A folder for PYTHONPATH holding the `strict` kind's module and its distribution's metadata."""
    info = folder / "strict_reviewer-0.1.dist-info"
    info.mkdir(parents=True)
    module = textwrap.dedent(STRICT_PLUGIN).format(rule=STRICT_RULE)
    (folder / "strict_reviewer.py").write_text(module, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: strict-reviewer\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pressroom.role_kinds]\nstrict = strict_reviewer\n")
    return folder


class Rows:
    """Plain SQL over a test's database (a connection per query: safe across process restarts)."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = create_engine(url, poolclass=NullPool)

    def all(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(text(sql), params)]

    def one(self, sql: str, **params: Any) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def close(self) -> None:
        self.engine.dispose()


def as_json(value: Any) -> Any:
    """A JSON column's value (SQLite gives its text, PostgreSQL the decoded value)."""
    return json.loads(value) if isinstance(value, str) else value


__all__ = [
    "ALL_ON_MODEL",
    "KEY",
    "KEY_VARIABLE",
    "MODEL",
    "PRICE_IN",
    "PRICE_OUT",
    "PROFILE",
    "SEED",
    "STRICT_RULE",
    "Role",
    "Rows",
    "as_json",
    "cost",
    "pipeline_toml",
    "strict_reviewer",
    "write_pipelines",
]

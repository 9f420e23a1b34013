"""The pipeline part of `status` and `show`: a saga's pipeline, its roles' progress, its model
usage. No I/O but one read of the shipped default pipeline's file (cached).

Both readers of `status` and `show` (the store's SQLModel path, and the quick
SQLite and PostgreSQL readers of the CLI) hand the same records to `progress`,
so the fields come out the same on every path (DESIGN.md, "Pipelines and
models"):

* `pipeline`: the name the saga was submitted with; `pipeline_digest`: the
  `pipeline` artifact it runs (null for a saga from before pipelines, which
  runs the shipped default);
* `roles`: the pipeline's roles in declaration order, each with its `kind`,
  `planner`, and its latest run (the highest round it ran in): `state`
  (`waiting`, `queued`, `done`, `unchanged`, `failed`, or `pending` when it
  never ran), `round`, `verdict` (a reviewer's `pass`/`fail`, else null),
  `reason`, and what its model calls spent (`usage`);
* `usage`: what every answered model call of the saga spent: `model_calls`,
  `tokens_in`, `tokens_out`, `cost_usd`.

The pipeline's roles are read from the stored artifact's body (the pipeline
as `model_dump(mode="json", by_alias=True)` wrote it: a `role` list) without
pydantic, so the quick readers stay light: only the names and kinds are
needed, and the pipeline was checked when it was stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any, NamedTuple, Protocol

DEFAULT_PIPELINE = "default"
DETERMINISTIC = "deterministic"
PENDING = "pending"  # a role with no run yet


class PipelineSaga(Protocol):
    @property
    def pipeline(self) -> str: ...
    @property
    def pipeline_digest(self) -> str | None: ...


class RoleRunRecord(Protocol):
    """A `role_runs` row (`orchestrator.store.tables.RoleRunRow`)."""

    @property
    def role(self) -> str: ...
    @property
    def round(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def verdict(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...


class Spent(NamedTuple):
    """What one role's answered model calls spent (a group of `model_calls` rows)."""

    role: str
    model_calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float


def usage_of(spent: Sequence[Spent]) -> dict[str, Any]:
    """The sum of `spent`, taken in role-name order (as `orchestrator.store.model_calls.usage`
    takes it), so a float total is the same whoever loaded the rows."""
    ordered = sorted(spent, key=lambda s: s.role)
    return {
        "model_calls": sum(int(s.model_calls) for s in ordered),
        "tokens_in": sum(int(s.tokens_in) for s in ordered),
        "tokens_out": sum(int(s.tokens_out) for s in ordered),
        "cost_usd": float(sum(float(s.cost_usd) for s in ordered)),
    }


@cache
def shipped_default() -> dict[str, Any]:
    """The body of the shipped default pipeline, which a saga with no `pipeline_digest` runs."""
    import tomllib  # only for a saga from before pipelines: `status` starts without it
    from importlib.resources import files

    text = files("roles").joinpath("pipelines", f"{DEFAULT_PIPELINE}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def pipeline_body(
    saga: PipelineSaga, artifact_body: Callable[[str], Mapping[str, Any] | None]
) -> Mapping[str, Any] | None:
    """The saga's pipeline as stored (`artifact_body` loads an artifact by digest; None when it
    is missing), or the shipped default for a saga from before pipelines."""
    if saga.pipeline_digest is None:
        return shipped_default()
    return artifact_body(saga.pipeline_digest)


def _declared(body: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """(name, kind, planner) of each declared role, in order."""
    roles = (body or {}).get("role")
    if not isinstance(roles, list):
        return []
    return [
        (str(r["name"]), str(r.get("kind", "")), str(r.get("planner") or DETERMINISTIC))
        for r in roles
        if isinstance(r, Mapping) and "name" in r
    ]


def progress(
    saga: PipelineSaga,
    body: Mapping[str, Any] | None,
    runs: Sequence[RoleRunRecord],
    spent: Sequence[Spent],
) -> dict[str, Any]:
    """The `pipeline`, `pipeline_digest`, `roles` and `usage` fields (module docstring)."""
    latest: dict[str, RoleRunRecord] = {}
    for each in sorted(runs, key=lambda r: r.round):
        latest[each.role] = each
    by_role = {s.role: s for s in spent}
    roles = []
    for name, kind, planner in _declared(body):
        run = latest.get(name)
        mine = by_role.get(name)
        roles.append(
            {
                "name": name,
                "kind": kind,
                "planner": planner,
                "state": run.state if run is not None else PENDING,
                "round": run.round if run is not None else None,
                "verdict": run.verdict if run is not None else None,
                "reason": run.reason if run is not None else None,
                "usage": usage_of([mine] if mine is not None else []),
            }
        )
    return {
        "pipeline": saga.pipeline,
        "pipeline_digest": saga.pipeline_digest,
        "roles": roles,
        "usage": usage_of(spent),
    }


__all__ = [
    "DEFAULT_PIPELINE",
    "PENDING",
    "PipelineSaga",
    "RoleRunRecord",
    "Spent",
    "pipeline_body",
    "progress",
    "shipped_default",
    "usage_of",
]

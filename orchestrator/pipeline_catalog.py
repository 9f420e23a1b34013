"""`pipelines list` and `pipelines show`: the pipelines a submit may name, as data.

One answer for the CLI, the HTTP API and the MCP tools:

    listing   {"pipelines": [{"name", "description", "file", "roles": [role names]}],
               "invalid": [{"name", "file", "error"}]}
    detail    {"name", "description", "file", "roles": [{"name", "kind", "after",
               "planner", "model", "budget", "tools"}], "models": [{"name", "model",
               "base_url"}], "mcp": [server names], "budget"}

A file that does not parse is not left out in silence: `listing` names it
under `invalid` with the one line `orchestrator.core.pipeline` words (the file
and the field), and the good ones are still listed; `detail` of it raises
that line (`InvalidPipeline`, exit 2). A model profile is shown by its name,
model and endpoint, never with a key: the file holds none (`api_key_env`
names the variable it is read from), and an endpoint's user, password, query
and fragment are dropped, in case one was written there.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from orchestrator import pipeline_files
from orchestrator.core.config import Settings
from orchestrator.core.pipeline import Budget, InvalidPipeline, ModelProfile, Pipeline


def listing(settings: Settings) -> dict[str, Any]:
    """Every pipeline by name, each from the folder that wins for it (`pipeline_files.available`)."""
    pipelines: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for found in pipeline_files.available(settings):
        try:
            pipeline = pipeline_files.parse_file(found.name, found.path)
        except InvalidPipeline as exc:
            invalid.append({"name": found.name, "file": str(found.path), "error": str(exc)})
            continue
        pipelines.append(
            {
                "name": pipeline.name,
                "description": pipeline.description,
                "file": str(found.path),
                "roles": [role.name for role in pipeline.roles],
            }
        )
    return {"pipelines": pipelines, "invalid": invalid}


def detail(settings: Settings, name: str) -> dict[str, Any]:
    """The pipeline `name`: NotFound when there is none, InvalidInput for a bad name or file."""
    pipeline = pipeline_files.load(settings, name)
    path = next((f.path for f in pipeline_files.available(settings) if f.name == pipeline.name), None)
    return describe(pipeline, str(path) if path is not None else None)


def describe(pipeline: Pipeline, file: str | None) -> dict[str, Any]:
    """The `detail` shape of a parsed pipeline."""
    roles = []
    for role in pipeline.roles:
        profile = pipeline.profile(role)
        roles.append(
            {
                "name": role.name,
                "kind": role.kind,
                "after": list(role.after),
                "planner": role.planner,
                "model": profile.model if profile is not None else None,
                "budget": _budget(role.budget),
                "tools": list(role.tools),
            }
        )
    return {
        "name": pipeline.name,
        "description": pipeline.description,
        "file": file,
        "roles": roles,
        "models": [_profile(name, profile) for name, profile in sorted(pipeline.models.items())],
        "mcp": sorted(pipeline.mcp),
        "budget": _budget(pipeline.budget),
    }


def _budget(budget: Budget | None) -> dict[str, Any] | None:
    return None if budget is None else budget.model_dump(mode="json", exclude_none=True)


def _profile(name: str, profile: ModelProfile) -> dict[str, Any]:
    return {"name": name, "model": profile.model, "base_url": _endpoint(profile.base_url)}


def _endpoint(url: str | None) -> str | None:
    """`url` without user, password, query or fragment."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


__all__ = ["describe", "detail", "listing"]

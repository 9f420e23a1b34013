"""Another MCP server's tools as harness tools: names, risk, schema, key. No I/O.

MCP is a protocol boundary here, not an authorization boundary. A tool that
server `archive` offers as `search` becomes the harness tool
``mcp:archive/search`` (`tool_name`), and from then on it is a tool like any
other on the one path: its input is validated against the JSON Schema the
server published (`arguments_model`), its risk class is the one the
pipeline's ``[mcp.archive] risk`` map gives it (`risk_for`; a tool the map
does not list is ``deny``, and the server's own annotations such as
``readOnlyHint`` are never read for this), and the capability it needs is its
own name, which a role holds only when its ``tools`` list names it
(`declared_tools`).

A ``high_risk`` entry is refused like ``deny`` (`risk_for`): a high-risk
harness tool needs an approval bound to a saga's version and destination set,
which a third party's tool call has no way to name.

A write's business key is the saga, the tool and the digest of its validated
arguments (`write_key`): the same write asked again in the same saga is the
same effect, answered from the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from orchestrator.harness.digests import args_digest
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import NO_PROBE, Risk, ToolContext, ToolSpec

PREFIX: Final = "mcp:"
# What an MCP tool may be offered with when its server could not be asked: any object.
ANY_OBJECT: Final[dict[str, Any]] = {"type": "object"}
MAX_DESCRIPTION: Final = 1000


def tool_name(server: str, tool: str) -> str:
    """The harness name of `server`'s tool `tool`: ``mcp:SERVER/TOOL``."""
    return f"{PREFIX}{server}/{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an ``mcp:SERVER/TOOL`` name; None for any other name."""
    if not name.startswith(PREFIX):
        return None
    server, slash, tool = name[len(PREFIX) :].partition("/")
    return (server, tool) if server and slash and tool else None


def risk_for(risk_map: Mapping[str, str], tool: str) -> Risk:
    """The risk class the pipeline gives `tool`: ``deny`` unless listed; ``high_risk`` too."""
    declared = risk_map.get(tool)
    if declared is None:
        return Risk.DENY
    risk = Risk(declared)
    return Risk.DENY if risk is Risk.HIGH_RISK else risk


def declared_tools(tools: Iterable[str]) -> frozenset[str]:
    """The capabilities a role's ``tools`` list grants: exactly its ``mcp:SERVER/TOOL`` names."""
    return frozenset(t for t in tools if split_name(t) is not None)


@dataclass(frozen=True)
class Discovered:
    """One tool as the server listed it (`tools/list`): its annotations are kept, never trusted."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(ANY_OBJECT))
    annotations: Mapping[str, Any] = field(default_factory=dict)


class McpArguments(BaseModel):
    """An MCP tool's arguments, validated against the JSON Schema its server published.

    Subclasses are made per tool by `arguments_model`; `model_json_schema` is the
    server's schema, which is what a model is shown.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    schema_: ClassVar[dict[str, Any]] = ANY_OBJECT
    validator_: ClassVar[Draft202012Validator] = Draft202012Validator(ANY_OBJECT)

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise PydanticCustomError("mcp_arguments", "the arguments must be a JSON object")
        errors = sorted(cls.validator_.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            where = ".".join(str(p) for p in first.absolute_path) or "arguments"
            raise PydanticCustomError(
                "mcp_arguments", "{where}: {message}", {"where": where, "message": first.message}
            )
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return dict(cls.schema_)

    def arguments(self) -> dict[str, Any]:
        """The arguments as given (the server's names, its types)."""
        return dict(self.model_extra or {})


def arguments_model(name: str, schema: Mapping[str, Any]) -> type[McpArguments]:
    """A model that validates a call's arguments against `schema`; `ValueError` when the
    schema is not a valid JSON Schema for an object (such a tool is refused, `tool_spec`)."""
    body = dict(schema)
    if body.get("type") != "object":
        raise ValueError(f"{name}: the input schema is not an object schema")
    try:
        Draft202012Validator.check_schema(body)
    except SchemaError as exc:
        raise ValueError(f"{name}: the input schema is not valid JSON Schema: {exc.message}") from None
    attrs = {"schema_": body, "validator_": Draft202012Validator(body), "__module__": __name__}
    return type(f"Args_{_ident(name)}", (McpArguments,), attrs)


def write_key(saga_id: str | None, name: str) -> Callable[[Any], str]:
    """The business key of a write of tool `name` in saga `saga_id`, from its arguments."""

    def key(model: Any) -> str:
        body = model.arguments() if isinstance(model, McpArguments) else {}
        return f"{name}:{saga_id or '-'}:{args_digest(body)[:32]}"

    return key


# Runs one validated call on the server: (context, server, tool, arguments) -> receipt.
CallServer = Callable[[ToolContext, str, str, dict[str, Any]], dict[str, Any]]


def tool_spec(
    server: str,
    tool: Discovered,
    risk_map: Mapping[str, str],
    *,
    saga_id: str | None,
    call: CallServer,
) -> ToolSpec:
    """The harness spec of one discovered tool; its executor calls `call` with its arguments."""
    name = tool_name(server, tool.name)
    risk = risk_for(risk_map, tool.name)
    try:
        model = arguments_model(name, tool.input_schema)
    except ValueError:
        return _denied(name, tool, "its input schema is not a usable JSON Schema object")

    def execute(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
        assert isinstance(arguments, McpArguments)
        return call(ctx, server, tool.name, arguments.arguments())

    description = (tool.description or f"The {tool.name} tool of the MCP server {server}.")[:MAX_DESCRIPTION]
    return ToolSpec(
        name=name,
        description=description,
        input_model=model,
        risk=risk,
        executor=None if risk is Risk.DENY else execute,
        key=write_key(saga_id, name) if risk is Risk.REVERSIBLE_WRITE else None,
        status_probe=NO_PROBE if risk is Risk.REVERSIBLE_WRITE else None,
        annotations={
            "mcp_server": server,
            "mcp_tool": tool.name,
            "server_annotations": dict(tool.annotations),
        },
    )


def offered(registry: Registry, tools: Iterable[str]) -> list[ToolSpec]:
    """The ``mcp:`` tools of a role's list that a model may be shown: registered, not ``deny``."""
    found = [registry.get(name) for name in tools if split_name(name) is not None]
    return [spec for spec in found if spec is not None and spec.risk is not Risk.DENY]


def _denied(name: str, tool: Discovered, why: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"Refused: {why}.",
        input_model=McpArguments,
        risk=Risk.DENY,
        executor=None,
        annotations={"mcp_tool": tool.name},
    )


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


__all__ = [
    "ANY_OBJECT",
    "CallServer",
    "Discovered",
    "McpArguments",
    "PREFIX",
    "arguments_model",
    "declared_tools",
    "offered",
    "risk_for",
    "split_name",
    "tool_name",
    "tool_spec",
    "write_key",
]

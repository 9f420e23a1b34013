"""`tools/list` for the MCP server: a tool description as an MCP `Tool`, and the answer envelope.

Built from the tool path's descriptions (`ToolInfo`), never from the
registry: nothing here can reach an executor.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from mcp import types
from pydantic import BaseModel, create_model

from orchestrator.harness.provenance import DataEnvelope
from orchestrator.harness.spec import Risk, ToolInfo

HINTS: dict[Risk, dict[str, bool]] = {
    Risk.READ_ONLY: {"read_only_hint": True},
    Risk.REVERSIBLE_WRITE: {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True},
    Risk.HIGH_RISK: {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": True},
    Risk.DENY: {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
}


# -- tools/list ---------------------------------------------------------------
def internal(spec: ToolInfo) -> bool:
    """A tool only Pressroom's own runner calls; MCP clients never see it."""
    return bool(spec.annotations.get("internal"))


class ApprovalNeeded(BaseModel):
    """What a person does so that a waiting high-risk call may go ahead."""

    saga_id: str
    version_digest: str
    destination: str | None = None
    approve_command: str
    review_page: str


class Answer(DataEnvelope):
    """What an MCP client gets back: tool output as data, with the call's ids."""

    idempotency_key: str | None = None
    event_id: str | None = None
    approval: ApprovalNeeded | None = None


@cache
def answer_schema(output_model: type[BaseModel]) -> dict[str, Any]:
    content: Any = output_model | None
    model = create_model(f"{output_model.__name__}Answer", __base__=Answer, content=(content, None))
    return model.model_json_schema()


def tool_of(spec: ToolInfo) -> types.Tool:
    description = spec.description
    if spec.risk is Risk.DENY:
        description += " Denied by policy: listed so that it is known; every call is refused."
    title = spec.annotations.get("title")
    return types.Tool(
        name=spec.name,
        description=description,
        input_schema=spec.input_schema,
        output_schema=answer_schema(spec.output_model) if spec.output_model else None,
        annotations=types.ToolAnnotations(
            title=title if isinstance(title, str) else None, **HINTS[spec.risk]
        ),
        _meta={"pressroom/risk": spec.risk.value, "pressroom/capability": spec.needed_capability},
    )


__all__ = ["HINTS", "Answer", "ApprovalNeeded", "answer_schema", "internal", "tool_of"]

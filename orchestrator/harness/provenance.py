"""Tool output as data (invariant 6). No I/O.

Whatever a tool returns goes back to a planner wrapped in a `DataEnvelope`:
it names where the data came from and says, in its type, that it is data.
Nothing in an envelope can call a tool, grant a capability or count as an
approval: the engine reads decisions only from the planner's proposals and
approvals only from the approvals table.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Provenance(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    call_id: str
    source: str | None = None
    digest: str | None = None


class DataEnvelope(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["data"] = "data"
    trust: Literal["untrusted"] = "untrusted"
    status: str
    provenance: Provenance
    content: Any = None
    reason: str | None = None
    flags: tuple[str, ...] = ()


def wrap(tool: str, call_id: str, status: str, content: Any, reason: str | None = None) -> DataEnvelope:
    source = digest = None
    flags: tuple[str, ...] = ()
    if isinstance(content, dict):
        src, dig = content.get("source"), content.get("source_digest") or content.get("digest")
        source = src if isinstance(src, str) else None
        digest = dig if isinstance(dig, str) else None
        if content.get("suspicious"):
            flags = ("suspicious-instructions",)
    return DataEnvelope(
        status=status,
        provenance=Provenance(tool=tool, call_id=call_id, source=source, digest=digest),
        content=content,
        reason=reason,
        flags=flags,
    )


__all__ = ["DataEnvelope", "Provenance", "wrap"]

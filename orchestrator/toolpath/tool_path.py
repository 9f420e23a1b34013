"""The port entry points get: the wrapped tool path, never the registry. No I/O here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from orchestrator.harness.spec import ToolCall, ToolInfo, ToolResult
from orchestrator.toolpath.call import Caller


class ToolPath(Protocol):
    """Call a tool through every wrapper; list what may be called (descriptions only)."""

    def call(self, proposal: ToolCall, caller: Caller) -> ToolResult: ...

    @property
    def tools(self) -> Sequence[ToolInfo]: ...


__all__ = ["ToolPath"]

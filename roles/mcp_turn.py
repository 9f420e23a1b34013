"""A role's MCP tools for one turn: connect, offer, close (`with mcp_tools(ctx) as ctx:`).

A pipeline role that lists ``tools = ["mcp:archive/search"]`` gets, for the
length of its turn, a session with each ``[mcp.NAME]`` server its tools name
(`orchestrator.toolpath.mcp_host.McpHost`), and a harness whose registry also
holds every tool those servers list, as ``mcp:SERVER/TOOL`` specs with the
pipeline's risk classes (``deny`` for any it does not list). The catalogue a
model planner is offered from is that registry too, so `roles.turn` offers the
role's declared tools that are not ``deny``. The sessions close when the turn
ends, whatever it ends with.

Each answer is screened as source text is (`roles.injection.assess`, against
the saga's brief): what reads as instructions flags the envelope, and is data
either way. The capabilities a role holds for these tools are granted by the
role handler (`roles.handlers`): exactly the ``mcp:`` names its ``tools`` list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from sqlmodel import Session

from orchestrator.core.pipeline import McpServer, Pipeline
from orchestrator.harness.mcp_tools import declared_tools, split_name
from orchestrator.toolpath.mcp_host import McpHost
from roles.injection import assess
from roles.turn import TurnContext
from sagas import records


@contextmanager
def mcp_tools(ctx: TurnContext) -> Iterator[TurnContext]:
    """`ctx` with the role's MCP servers' tools in its harness and catalogue (`ctx` itself
    when the role declares none); every session is closed on leaving."""
    declared = sorted(declared_tools(ctx.role.tools))
    if not declared:
        yield ctx
        return
    servers = servers_for(ctx.pipeline, declared, most=ctx.ports.settings.destination_timeout)
    with Session(ctx.ports.engine) as s:
        brief = records.load_saga(s, ctx.saga_id).brief
    with McpHost.open(servers) as host:
        specs = host.specs(saga_id=ctx.saga_id, wanted=declared, screen=lambda text: assess(text, brief))
        tools = ctx.ports.tools.with_tools(specs)
        yield replace(ctx, ports=replace(ctx.ports, tools=tools, catalogue=tools.registry))


def servers_for(pipeline: Pipeline, tools: Iterable[str], *, most: float) -> dict[str, McpServer]:
    """The servers `tools` name, each call bounded by `most` seconds: a call never outwaits the
    ledger's claim on its key (the destination timeout plus five seconds), so no second caller
    can take the key while the first still waits."""
    names = {parts[0] for name in tools if (parts := split_name(name)) is not None}
    return {
        name: server.model_copy(update={"call_timeout": min(server.call_timeout, most)})
        for name, server in sorted(pipeline.mcp.items())
        if name in names
    }


__all__ = ["mcp_tools", "servers_for"]

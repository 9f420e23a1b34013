"""The MCP host: one client session per declared server, its tools as harness tools.

`McpHost.open(servers)` connects to each ``[mcp.NAME]`` server of a pipeline
with the official SDK's `Client` (a ``command`` runs as a subprocess over
stdio; a ``url`` is streamable HTTP with ``Authorization: Bearer`` from the
variable ``token_env`` names, read when connecting, never from the file),
lists its tools (`tools/list`), and `specs()` maps each one to a `ToolSpec`
named ``mcp:SERVER/TOOL`` (`orchestrator.harness.mcp_tools`: risk from the
pipeline, ``deny`` when unlisted). The specs go into a harness
(`Harness.with_tools`), so every call takes the one tool path: schema, policy
and capabilities, the ledger for writes (intent committed before the request
is sent), spans. `close()` ends every session (and a stdio server's process);
hosts still open at process exit are closed then.

The SDK is async and the tool path is not: sessions live on one event-loop
thread per process, and a call blocks its caller until its answer, its
timeout, or the connection's end. Every wait is bounded: `connect_timeout`
for connecting and listing, `call_timeout` for each call (both per server, from
the pipeline).

Failures, as a destination's (`orchestrator.core.errors`)::

    NotApplied    the server could not be reached, or its connection had ended,
                  before the call (nothing was sent); or it answered with an
                  error (a JSON-RPC error, or a result with ``isError``)
    MaybeApplied  the request was sent and no answer came (timeout, connection
                  lost while waiting): a write is left `uncertain` by the
                  ledger, and nothing sends it again

A server's output is data: the receipt keeps it as the server sent it
(structured content and text), the call id and business key the request
carried in its ``_meta``, and what `screen` found in it (``suspicious``,
``reasons``), which the provenance envelope turns into a flag. Nothing in it
reaches a capability or a policy decision.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar, cast

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, RequestParamsMeta, TextContent

from orchestrator.core.config import named_secret
from orchestrator.core.errors import MaybeApplied, NotApplied
from orchestrator.core.pipeline import McpServer
from orchestrator.harness.mcp_tools import (
    ANY_OBJECT,
    CallServer,
    Discovered,
    split_name,
    tool_name,
    tool_spec,
)
from orchestrator.harness.spec import ToolContext, ToolSpec

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_TEXT_CHARS: Final = 20_000
# `_meta` keys a call is sent with: a server may use the key to apply a repeat once.
META_CALL_ID: Final = "pressroom/call_id"
META_KEY: Final = "pressroom/idempotency_key"

# What the screen says of a text: the reasons it reads as instructions (empty: none).
Screen = Callable[[str], Sequence[str]]


def no_screen(_text: str) -> Sequence[str]:
    return ()


class McpSessions(Protocol):
    """The port a tool spec calls through: one `tools/call` on one server."""

    def call(self, server: str, tool: str, arguments: dict[str, Any], meta: dict[str, Any]) -> CallToolResult:
        """The server's answer; raises `NotApplied` or `MaybeApplied` when there is none."""
        ...


# -- the loop thread -----------------------------------------------------------------------


class _LoopThread:
    """One asyncio loop on a daemon thread, for every MCP session of the process."""

    def __init__(self) -> None:
        self.pid = os.getpid()  # a forked child (a prefork worker) starts its own
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="pressroom-mcp", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_LOCK = threading.Lock()
_THREAD: _LoopThread | None = None
_OPEN: weakref.WeakSet[McpHost] = weakref.WeakSet()


def _loop() -> _LoopThread:
    global _THREAD
    with _LOCK:
        if _THREAD is None:
            atexit.register(close_all)  # a forked child inherits it
        elif _THREAD.pid != os.getpid():  # forked: the parent's loop thread is not here
            for host in list(_OPEN):
                if host.pid != os.getpid():
                    _OPEN.discard(host)  # its sessions are the parent's to close
        if _THREAD is None or _THREAD.pid != os.getpid():
            _THREAD = _LoopThread()
        return _THREAD


def close_all() -> None:
    """Close every host still open (registered to run at process exit)."""
    for host in list(_OPEN):
        host.close()


# -- one connection ------------------------------------------------------------------------


@dataclass
class _Connection:
    """One server's session, held open by a task on the loop until `stop` is set."""

    name: str
    client: Client | None = None
    tools: list[Discovered] = field(default_factory=list)
    down: str | None = None  # why it cannot be used (never connected, or its connection ended)
    protocol: str | None = None
    stop: asyncio.Event | None = None
    task: Future[None] | None = None


def _client(server: McpServer) -> Client:
    if server.command is not None:
        command, *args = server.command
        return Client(StdioServerParameters(command=command, args=list(args)), cache=None)
    assert server.url is not None
    headers: dict[str, str] = {}
    if server.token_env:
        token = named_secret(server.token_env)
        if token is None:
            raise NotApplied(f"the variable {server.token_env} (its token_env) is not set")
        headers["Authorization"] = f"Bearer {token.get_secret_value()}"
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(server.connect_timeout, read=None))
    return Client(streamable_http_client(server.url, http_client=http), cache=None)


async def _hold(conn: _Connection, server: McpServer, ready: Future[None]) -> None:
    """Connect, list the tools, say so on `ready`, then keep the session until `stop`."""
    conn.stop = asyncio.Event()
    try:
        async with _client(server) as client:
            listed = await client.list_tools()
            conn.tools = [_discovered(t) for t in listed.tools]
            conn.protocol = client.session.protocol_version
            conn.client = client
            ready.set_result(None)
            await conn.stop.wait()
    except Exception as exc:  # any failure here means the server is down to us
        conn.down = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        conn.client = None
        if conn.down is None:
            conn.down = "the connection was closed"
        if not ready.done():
            ready.set_exception(NotApplied(conn.down))


def _discovered(tool: Any) -> Discovered:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else dict(ANY_OBJECT)
    notes = tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else {}
    return Discovered(
        name=tool.name, description=tool.description or "", input_schema=schema, annotations=notes
    )


# -- the host ------------------------------------------------------------------------------


class McpHost:
    """Client sessions to a pipeline's MCP servers, and their tools as harness specs."""

    def __init__(self, servers: Mapping[str, McpServer]) -> None:
        self.servers = dict(servers)
        self.pid = os.getpid()
        self._conns: dict[str, _Connection] = {}
        self._closed = False

    @classmethod
    def open(cls, servers: Mapping[str, McpServer]) -> McpHost:
        """Connect to every server, side by side, each within its ``connect_timeout``; one
        that cannot be reached is kept as down."""
        host = cls(servers)
        _OPEN.add(host)
        thread = _loop()
        waits: list[tuple[_Connection, float, Future[None]]] = []
        for name, server in host.servers.items():
            conn = _Connection(name)
            host._conns[name] = conn
            ready: Future[None] = Future()
            conn.task = thread.submit(_hold(conn, server, ready))
            waits.append((conn, server.connect_timeout, ready))
        for conn, limit, ready in waits:
            try:
                ready.result(timeout=limit)
            except FutureTimeout:
                conn.down = f"no answer within {limit:g}s"
                assert conn.task is not None
                conn.task.cancel()
            except Exception as exc:  # the reason is kept on the connection
                conn.down = conn.down or f"{type(exc).__name__}: {exc}"
            if conn.down:
                log.warning("MCP server %s is not reachable: %s", conn.name, conn.down)
        return host

    def protocol(self, server: str) -> str | None:
        """The MCP revision negotiated with `server` (None: it was never reached)."""
        conn = self._conns.get(server)
        return conn.protocol if conn is not None else None

    def down(self, server: str) -> str | None:
        """Why `server` cannot be called now; None when it can."""
        conn = self._conns.get(server)
        if conn is None:
            return "it is not declared"
        return None if conn.client is not None else conn.down or "not connected"

    def call(self, server: str, tool: str, arguments: dict[str, Any], meta: dict[str, Any]) -> CallToolResult:
        conn = self._conns.get(server)
        client = conn.client if conn is not None else None
        if client is None:
            raise NotApplied(f"MCP server {server} is not reachable: {self.down(server)}")
        timeout = self.servers[server].call_timeout

        async def send() -> CallToolResult:
            return await client.session.call_tool(
                tool, arguments, read_timeout_seconds=timeout, meta=cast(RequestParamsMeta, meta)
            )

        future = _loop().submit(send())
        try:
            return future.result(timeout=timeout + 2.0)
        except FutureTimeout:
            future.cancel()
            raise MaybeApplied(f"MCP server {server}: no answer to {tool} within {timeout:g}s") from None
        except MCPError as exc:
            if exc.code in (REQUEST_TIMEOUT, CONNECTION_CLOSED):
                raise MaybeApplied(
                    f"MCP server {server}: {tool} was sent, then: {exc.error.message}"
                ) from None
            raise NotApplied(f"MCP server {server} refused {tool}: {exc.error.message}") from None
        except Exception as exc:  # an answer the SDK could not read: something happened there
            raise MaybeApplied(f"MCP server {server}: {tool}: {type(exc).__name__}: {exc}") from None

    def specs(
        self, *, saga_id: str | None, wanted: Sequence[str] = (), screen: Screen = no_screen
    ) -> list[ToolSpec]:
        """Every listed tool as a spec; and each `wanted` ``mcp:`` name of a declared server
        that no listing holds (its server is down, or lists no such tool) as one whose call
        fails definitely, so a role's declared tool is refused or fails, never silently missing."""
        call = caller(self, screen)
        out: dict[str, ToolSpec] = {}
        for server, decl in self.servers.items():
            conn = self._conns.get(server)
            for tool in conn.tools if conn is not None else ():
                out[tool_name(server, tool.name)] = tool_spec(
                    server, tool, decl.risk, saga_id=saga_id, call=call
                )
        for name in wanted:
            parts = split_name(name)
            if name in out or parts is None or parts[0] not in self.servers:
                continue
            missing = Discovered(parts[1])
            risk = self.servers[parts[0]].risk
            out[name] = tool_spec(parts[0], missing, risk, saga_id=saga_id, call=self._unlisted)
        return list(out.values())

    def _unlisted(
        self, ctx: ToolContext, server: str, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        why = self.down(server) or f"it lists no tool {tool!r}"
        raise NotApplied(f"MCP server {server} is not reachable: {why}")

    def close(self) -> None:
        """End every session (a stdio server's process ends with it), each within a bounded wait."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        thread = _THREAD
        if thread is None:
            return
        for conn in self._conns.values():
            if conn.stop is not None:
                thread.loop.call_soon_threadsafe(conn.stop.set)
        for name, conn in self._conns.items():
            if conn.task is None:
                continue
            try:
                conn.task.result(timeout=self.servers[name].connect_timeout)
            except Exception:  # noqa: BLE001 - closing: it ends either way
                conn.task.cancel()

    def __enter__(self) -> McpHost:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def caller(sessions: McpSessions, screen: Screen = no_screen) -> CallServer:
    """The executor body of every MCP spec: send the call with its id and key in ``_meta``,
    and keep the answer as a receipt; an error answer fails definitely."""

    def call(ctx: ToolContext, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        meta: dict[str, Any] = {META_CALL_ID: ctx.call_id}
        if ctx.idempotency_key:
            meta[META_KEY] = ctx.idempotency_key
        result = sessions.call(server, tool, arguments, meta)
        receipt = receipt_of(server, tool, ctx, result, screen)
        if result.is_error:
            raise NotApplied(f"MCP server {server}: {tool} answered with an error: {_said(result)}")
        return receipt

    return call


def _said(result: CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, TextContent))[:300]


def receipt_of(
    server: str, tool: str, ctx: ToolContext, result: CallToolResult, screen: Screen
) -> dict[str, Any]:
    """What the ledger keeps of an answer, and what the planner is shown: data, screened."""
    structured = result.structured_content
    # The text blocks are kept when there is no structured content (otherwise they repeat it).
    text = ""
    if structured is None:
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))[:MAX_TEXT_CHARS]
    reasons = list(screen(text if structured is None else json.dumps(structured, ensure_ascii=False)))
    return {
        "server": server,
        "tool": tool,
        "call_id": ctx.call_id,
        "idempotency_key": ctx.idempotency_key,
        "is_error": bool(result.is_error),
        "structured": structured,
        "text": text,
        "suspicious": bool(reasons),
        "reasons": reasons,
    }


__all__ = [
    "META_CALL_ID",
    "META_KEY",
    "McpHost",
    "McpSessions",
    "Screen",
    "caller",
    "close_all",
    "no_screen",
    "receipt_of",
]

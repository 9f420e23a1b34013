"""`pressroom mcp` end to end, with the official SDK's own client.

Each test starts the console script as a subprocess (stdio, or streamable
HTTP on a free port) against a fresh SQLite database and talks to it with
`ClientSession` over the SDK's transports; no JSON-RPC is written by hand.
For each case the same call is also made in-process, through
`app.harness.call` with the same identity, and the statuses must agree
(protocol parity). Side effects are checked where they would land: the
database tables and the site folder.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.entrypoints.mcp_server import DEFAULT_CAPABILITIES, Identity, build_server, caller_for
from orchestrator.harness.spec import Risk, ToolCall, ToolContext, ToolResult, ToolSpec
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import dispose_all
from orchestrator.toolpath.engine import Caller

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PRESSROOM = Path(sys.executable).with_name("pressroom")
CORPUS = ROOT / "roles" / "sample_corpus"
INJECTED = "friends-book-sale.md"  # asks to publish to a foreign webhook and to approve itself
BRIEF = "The history of the Millbrook public library network and its branches"
SECRET = "e2e-mcp-signing-key-0123456789abcdef"
STARTUP = 30.0  # seconds a server may take to answer its first message

# What each risk class must say to a client (MCP tool annotations).
EXPECTED_HINTS = {
    Risk.READ_ONLY: {"readOnlyHint": True},
    Risk.REVERSIBLE_WRITE: {"readOnlyHint": False, "idempotentHint": True, "destructiveHint": False},
    Risk.HIGH_RISK: {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
    Risk.DENY: {"readOnlyHint": False, "destructiveHint": True},
}


@dataclass
class World:
    """One test's database, site folder and environment, shared by every process."""

    root: Path
    token: str | None = None  # closed mode: the admin's token, for the CLI helpers
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def db(self) -> Path:
        return self.root / "db.sqlite"

    @property
    def site(self) -> Path:
        return self.root / "site"

    @property
    def dest(self) -> str:
        return f"site:{self.site}"

    def env(self, broker: str = "inline://", **extra: str) -> dict[str, str]:
        return {
            "PRESSROOM_DATABASE_URL": f"sqlite:///{self.db}",
            "PRESSROOM_SECRET": SECRET,
            "PRESSROOM_BROKER_URL": broker,
            **({"PRESSROOM_TOKEN": self.token} if self.token else {}),
            **extra,
        }

    def process_env(self, broker: str = "inline://", **extra: str) -> dict[str, str]:
        """This machine's environment without stray Pressroom or OpenTelemetry settings, plus ours."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PRESSROOM_", "OTEL_"))}
        return {**env, **self.env(broker, **extra)}

    def add_user(self, name: str, *roles: str) -> str:
        """`pressroom users add` (the first one needs no token); the new token."""
        args = [arg for role in roles for arg in ("--role", role)]
        token = str(self.cli("users", "add", name, *args)["token"])
        self.tokens[name] = token
        return token

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.db) as conn:
            return conn.execute(sql, args).fetchall()

    @cached_property
    def app(self) -> Pressroom:
        """The same database, in this process; no broker, so nothing it queues is delivered here."""
        return build_app(Settings(database_url=f"sqlite:///{self.db}", secret=SECRET, broker_url="none://"))

    def local(
        self,
        tool: str,
        arguments: dict[str, Any],
        actor: str = "mcp-client",
        caps: frozenset[str] | None = None,
    ) -> ToolResult:
        """The in-process answer to the same call, with the same identity (protocol parity)."""
        proposal = ToolCall(tool=tool, arguments=arguments, call_id=uuid.uuid4().hex)
        identity = Identity(actor, DEFAULT_CAPABILITIES if caps is None else caps)
        return self.app.harness.call(proposal, caller_for(identity, arguments))

    def cli(self, *args: str, broker: str = "inline://") -> dict[str, Any]:
        done = subprocess.run(
            [str(PRESSROOM), *args, "--json"],
            env=self.process_env(broker),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        out: dict[str, Any] = json.loads(done.stdout)
        return out

    def submit(self) -> dict[str, Any]:
        """A saga in ready-for-review: `pressroom submit` runs research, writing and review in-process."""
        out = self.cli("submit", "--brief", BRIEF, "--corpus", str(CORPUS), "--dest", self.dest)
        assert out["state"] == "ready-for-review", out
        return out


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield World(tmp_path)
    dispose_all()


@asynccontextmanager
async def stdio_session(world: World, *args: str, era: str = "handshake") -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=str(PRESSROOM), args=["mcp", *args], env=world.env(), cwd=str(world.root)
    )
    log = world.root / "mcp-stdio.log"
    with open(log, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                try:
                    with anyio.fail_after(STARTUP):
                        await (session.initialize() if era == "handshake" else session.discover())
                except Exception as exc:
                    raise AssertionError(f"pressroom mcp did not start:\n{log.read_text()}") from exc
                yield session


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


def status_of(result: types.CallToolResult) -> str:
    answer = structured(result)
    assert answer["kind"] == "data" and answer["trust"] == "untrusted", answer
    assert result.is_error == (answer["status"] not in ("ok", "replayed")), answer
    return str(answer["status"])


def check_listing(world: World, listed: types.ListToolsResult) -> None:
    # Every registered tool but the internal ones (compensation is an operator's cancel, not an MCP tool).
    listable = [spec for spec in world.app.registry if not spec.annotations.get("internal")]
    tools = {tool.name: tool for tool in listed.tools}
    assert sorted(tools) == sorted(spec.name for spec in listable)
    assert "publish.compensate" not in tools
    for spec in listable:
        tool = tools[spec.name]
        assert tool.input_schema == spec.input_model.model_json_schema(), spec.name
        if spec.output_model is None:
            assert tool.output_schema is None, spec.name
        else:  # the answer envelope, its content typed by the tool's output model
            assert tool.output_schema is not None
            envelope = tool.output_schema["properties"]
            assert {"kind", "trust", "status", "provenance", "content", "flags"} <= set(envelope)
            assert spec.output_model.__name__ in json.dumps(envelope["content"]), spec.name
        assert tool.annotations is not None
        hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
        for hint, value in EXPECTED_HINTS[spec.risk].items():
            assert hints.get(hint) == value, (spec.name, hint, hints)


# -- no side door ---------------------------------------------------------------
class ProbeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(ge=1)


def test_every_call_takes_the_harness_path(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process, over the SDK's memory transport: the server's only way to a tool is `harness.call`."""
    effects: list[int] = []

    def effect(ctx: ToolContext, args: ProbeArgs) -> dict[str, int]:
        effects.append(args.n)
        return {"n": args.n}

    probe = ToolSpec(
        name="probe.write",
        description="Counts its calls.",
        input_model=ProbeArgs,
        risk=Risk.REVERSIBLE_WRITE,
        executor=effect,
        key=lambda a: f"probe-{a.n}",
    )
    settings = Settings(database_url=f"sqlite:///{world.db}", secret=SECRET, broker_url="none://")
    app = build_app(settings, extra_tools=[probe])
    one_path, seen = app.harness.call, []

    def spy(proposal: ToolCall, caller: Caller) -> ToolResult:
        seen.append(proposal.tool)
        return one_path(proposal, caller)

    monkeypatch.setattr(app.harness, "call", spy)
    server = build_server(app.harness, lambda _ctx: Identity("prober", frozenset({"probe.write"})))

    async def scenario() -> list[str]:
        async with Client(server, mode="legacy") as client:
            statuses = [
                status_of(await client.call_tool("probe.write", args)) for args in ({"n": "x"}, {"n": 0})
            ]
            statuses += [status_of(await client.call_tool("probe.write", {"n": 1})) for _ in range(2)]
            for name in app.registry.names():
                statuses.append(status_of(await client.call_tool(name, {"nonsense": True})))
            return statuses

    statuses = anyio.run(scenario)
    assert statuses[:4] == ["rejected", "rejected", "ok", "replayed"]
    assert set(statuses[4:]) == {"rejected"}  # no tool accepts those arguments
    assert effects == [1]  # invalid arguments and the replay never reached the executor
    assert seen == ["probe.write"] * 4 + app.registry.names()


# -- tools/list ---------------------------------------------------------------
@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_tools_list_is_the_registry(world: World, era: str) -> None:
    async def scenario() -> None:
        async with stdio_session(world, era=era) as session:
            expected = "2025-11-25" if era == "handshake" else "2026-07-28"
            assert session.protocol_version == expected
            check_listing(world, await session.list_tools())

    anyio.run(scenario)


# -- schema before execution, policy --------------------------------------------
def test_invalid_arguments_and_denied_tools_never_reach_an_executor(world: World) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("saga.submit", {"brief": BRIEF, "corpus": str(CORPUS), "destinations": []}),
        ("saga.submit", {"brief": BRIEF, "corpus": str(CORPUS), "destinations": [world.dest], "x": 1}),
        ("publish", {"saga_id": "s1", "destination": world.dest, "version_digest": "not-a-digest"}),
        ("corpus.search", {"saga_id": "s1", "limit": "many"}),
        ("approval.grant", {"saga_id": "s1", "version": 1}),
        ("capability.grant", {"capability": "publish"}),
        ("shell.run", {"command": "true"}),
        ("no.such.tool", {}),
    ]

    async def scenario() -> None:
        async with stdio_session(world) as session:
            for tool, arguments in cases:
                result = await session.call_tool(tool, arguments)
                answer = structured(result)
                assert status_of(result) == "rejected", (tool, answer)
                reason = answer["reason"]
                if tool.endswith(".grant") or tool == "shell.run":
                    assert "denied by policy" in reason
                elif tool != "no.such.tool":
                    assert reason.startswith("invalid arguments"), reason
                assert reason in text_of(result)
                local = world.local(tool, arguments)
                assert local.status.value == answer["status"]

    anyio.run(scenario)
    # Nothing ran: no saga, no intent, no ledger row, no applied call, nothing published.
    assert world.rows("SELECT count(*) FROM sagas") == [(0,)]
    assert world.rows("SELECT count(*) FROM ledger") == [(0,)]
    assert world.rows("SELECT DISTINCT kind, status FROM events") == [("tool_call", "rejected")]
    assert not world.site.exists()


def test_capabilities_come_from_the_command_line(world: World) -> None:
    saga = world.submit()
    arguments = {"brief": BRIEF, "corpus": str(CORPUS), "destinations": [world.dest]}
    caps = frozenset({"saga.status", "corpus.read"})

    async def scenario() -> None:
        async with stdio_session(world, "--as", "reader", "--capabilities", "saga.status,corpus.read") as s:
            refused = await s.call_tool("saga.submit", arguments)
            assert status_of(refused) == "rejected"
            assert "lacks capability 'saga.submit'" in structured(refused)["reason"]
            read = await s.call_tool("saga.status", {"saga_id": saga["saga_id"]})
            assert status_of(read) == "ok"
            assert structured(read)["content"]["state"] == "ready-for-review"
        assert world.local("saga.submit", arguments, "reader", caps).status.value == "rejected"
        assert world.local("saga.status", {"saga_id": saga["saga_id"]}, "reader", caps).status.value == "ok"

    anyio.run(scenario)
    assert world.rows("SELECT count(*) FROM sagas") == [(1,)]
    assert ("reader", "saga.submit", "rejected") in world.rows("SELECT actor, tool, status FROM events")


@pytest.mark.parametrize("capabilities", ["approval.grant", "publish,capability.grant", "reconcile"])
def test_a_capability_beyond_the_registry_is_refused_at_start(world: World, capabilities: str) -> None:
    done = subprocess.run(
        [str(PRESSROOM), "mcp", "--capabilities", capabilities],
        env=world.process_env(),
        cwd=world.root,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "denied by policy" in done.stderr or "unknown capabilities" in done.stderr


# -- saga tools ---------------------------------------------------------------
def test_submit_status_show_and_a_retried_submit_makes_one_saga(world: World) -> None:
    arguments = {"brief": BRIEF, "corpus": str(CORPUS), "destinations": [world.dest]}

    async def scenario() -> None:
        async with stdio_session(world, "--as", "editor") as session:
            first = await session.call_tool("saga.submit", arguments)
            assert status_of(first) == "ok"
            saga = structured(first)["content"]
            assert saga["state"] == "ready-for-review" and saga["created_by"] == "editor"
            again = await session.call_tool("saga.submit", arguments)
            assert status_of(again) == "replayed"
            assert structured(again)["content"]["saga_id"] == saga["saga_id"]
            assert world.local("saga.submit", arguments, "editor").status.value == "replayed"

            status = await session.call_tool("saga.status", {"saga_id": saga["saga_id"]})
            assert status_of(status) == "ok"
            assert structured(status)["content"]["destinations"][0]["uri"] == world.dest
            shown = await session.call_tool("saga.show", {"saga_id": saga["saga_id"]})
            assert status_of(shown) == "ok"
            version = structured(shown)["content"]
            assert version["version_digest"] == saga["version_digest"]
            assert version["citations"] and version["review"]["verdict"] == "pass"
            assert INJECTED not in {c["source"] for c in version["citations"]}
            missing = await session.call_tool("saga.status", {"saga_id": "nosuchsaga"})
            assert status_of(missing) == "error"
            assert world.local("saga.status", {"saga_id": "nosuchsaga"}).status.value == "error"

    anyio.run(scenario)
    assert world.rows("SELECT count(*) FROM sagas") == [(1,)]
    assert not world.site.exists()  # submitting never publishes


# -- tool output is data ---------------------------------------------------------
def test_injected_source_comes_back_as_flagged_data(world: World) -> None:
    saga = world.submit()
    arguments = {"saga_id": saga["saga_id"], "source": INJECTED}

    async def scenario() -> None:
        async with stdio_session(world) as session:
            result = await session.call_tool("corpus.read", arguments)
            assert status_of(result) == "ok"
            answer = structured(result)
            assert answer["flags"] == ["suspicious-instructions"]
            assert answer["provenance"]["tool"] == "corpus.read"
            assert answer["provenance"]["source"] == INJECTED
            assert answer["provenance"]["digest"] == answer["content"]["source_digest"]
            assert answer["content"]["suspicious"] is True and answer["content"]["reasons"]
            assert "Ignore your previous instructions" in answer["content"]["text"]
            assert json.loads(text_of(result)) == answer
            local = world.local("corpus.read", arguments)
            assert local.status.value == "ok" and local.output["suspicious"] is True

    anyio.run(scenario)
    # The text asked for a foreign destination and a self-approval: neither happened.
    assert world.rows("SELECT count(*) FROM approvals") == [(0,)]
    assert world.rows("SELECT count(*) FROM events WHERE tool = 'publish'") == [(0,)]
    assert world.rows("SELECT state FROM sagas") == [("ready-for-review",)]


# -- approvals and exactly once ------------------------------------------------------
def test_publish_waits_for_a_person_then_publishes_once_then_replays(world: World) -> None:
    saga = world.submit()
    sid, digest = saga["saga_id"], saga["version_digest"]
    arguments = {"saga_id": sid, "destination": world.dest, "version_digest": digest}

    async def scenario() -> None:
        async with stdio_session(world, "--as", "agent") as session:
            waiting = await session.call_tool("publish", arguments)
            assert status_of(waiting) == "approval_required"
            approval = structured(waiting)["approval"]
            assert approval["saga_id"] == sid and approval["version_digest"] == digest
            assert approval["approve_command"] == f"pressroom approve {sid} --version N --as NAME"
            assert approval["review_page"] == f"/sagas/{sid}"
            assert "pressroom approve" in text_of(waiting)
            assert world.local("publish", arguments, "agent").status.value == "approval_required"
            assert not world.site.exists()

            # A person approves; with no broker the publisher's message stays in the outbox.
            approved = await anyio.to_thread.run_sync(
                lambda: world.cli("approve", sid, "--version", "1", "--as", "alice", broker="none://")
            )
            assert approved["version_digest"] == digest
            assert world.rows("SELECT task FROM outbox WHERE sent_at IS NULL") == [
                ("pressroom.publisher.publish",)
            ]
            assert not world.site.exists()

            published = await session.call_tool("publish", arguments)
            assert status_of(published) == "ok", structured(published)
            receipt = structured(published)["content"]
            assert Path(receipt["path"]).is_file()
            again = await session.call_tool("publish", arguments)
            assert status_of(again) == "replayed"
            assert structured(again)["content"] == receipt
            assert world.local("publish", arguments, "agent").status.value == "replayed"
            # The record keeps the client's JSON-RPC request id as the call's id, beside its key.
            call_id = structured(published)["provenance"]["call_id"]
            assert call_id.isdigit(), call_id
            (key,) = world.rows(
                "SELECT json_extract(detail, '$.key') FROM events WHERE kind = 'tool_call' AND tool = 'publish' "
                "AND status = 'ok' AND json_extract(detail, '$.call_id') = ?",
                call_id,
            )[0]
            assert world.rows("SELECT tool, status FROM ledger WHERE key = ?", key) == [("publish", "done")]

    anyio.run(scenario)
    assert len(list(world.site.glob("*.md"))) == 1
    assert len(list((world.site / ".pressroom" / "receipts").glob("*.json"))) == 1
    assert world.rows("SELECT count(*) FROM events WHERE kind = 'intent' AND tool = 'publish'") == [(1,)]
    assert world.rows("SELECT status FROM ledger WHERE tool = 'publish'") == [("done",)]
    assert world.rows("SELECT consumed_at IS NOT NULL FROM approvals") == [(1,)]


# -- streamable HTTP -------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(world: World) -> Iterator[str]:
    """Closed mode: an admin, alice (reviewer: may read, may not submit or publish) and
    bob (author and operator); the server takes their tokens from the user store."""
    port = free_port()
    # an admin grants only roles they hold
    world.token = world.add_user("admin", "admin", "author", "reviewer", "operator")
    world.add_user("alice", "reviewer")
    world.add_user("bob", "author", "operator")
    log = open(world.root / "mcp-http.log", "w")
    process = subprocess.Popen(
        [str(PRESSROOM), "mcp", "--transport", "http", "--port", str(port)],
        env=world.process_env(),
        cwd=world.root,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(process, port, world.root / "mcp-http.log")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def wait_for_port(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)  # polling for readiness, nothing else
    raise AssertionError(f"pressroom mcp did not listen on {port} within {STARTUP}s:\n{log.read_text()}")


@asynccontextmanager
async def http_session(url: str, token: str | None, era: str = "handshake") -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                with anyio.fail_after(STARTUP):
                    await (session.initialize() if era == "handshake" else session.discover())
                yield session


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def test_http_needs_a_known_bearer_token(world: World, http_server: str) -> None:
    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=10) as plain:
            assert (await plain.get(http_server)).status_code == 401
            alice = world.tokens["alice"]
            wrong = {"Authorization": "Bearer " + alice[:-1] + ("x" if alice[-1] != "x" else "y")}
            assert (await plain.get(http_server, headers=wrong)).status_code == 401
        for token in (None, "not-a-token", world.tokens["alice"] + "x"):
            try:
                async with http_session(http_server, token) as session:
                    await session.list_tools()
            except Exception as exc:  # the SDK raises from inside its task groups
                assert any(isinstance(leaf, MCPError) for leaf in leaves(exc)), exc
            else:
                raise AssertionError(f"the server answered a client with token {token!r}")

    anyio.run(scenario)
    assert world.rows("SELECT count(*) FROM events") == [(0,)]


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_http_identity_and_roles_come_from_the_token(world: World, http_server: str, era: str) -> None:
    """Was `…capabilities_come_from_the_token` (PRESSROOM_MCP_TOKENS): the token's user
    and roles now come from the user store; alice (reviewer) may read but not submit."""
    saga = world.submit()
    submit_args = {"brief": BRIEF, "corpus": str(CORPUS), "destinations": [world.dest]}
    alice_caps = frozenset({"saga.status", "corpus.read"})

    async def scenario() -> None:
        async with http_session(http_server, world.tokens["alice"], era) as alice:
            check_listing(world, await alice.list_tools())
            status = await alice.call_tool("saga.status", {"saga_id": saga["saga_id"]})
            assert status_of(status) == "ok"
            assert structured(status)["content"]["version_digest"] == saga["version_digest"]
            refused = await alice.call_tool("saga.submit", submit_args)
            assert status_of(refused) == "rejected"
            assert world.local("saga.submit", submit_args, "alice", alice_caps).status.value == "rejected"
            denied = await alice.call_tool("approval.grant", {"saga_id": saga["saga_id"]})
            assert status_of(denied) == "rejected"
        async with http_session(http_server, world.tokens["bob"], era) as bob:
            injected = await bob.call_tool("corpus.read", {"saga_id": saga["saga_id"], "source": INJECTED})
            assert status_of(injected) == "ok"
            assert structured(injected)["flags"] == ["suspicious-instructions"]
            waiting = await bob.call_tool(
                "publish",
                {
                    "saga_id": saga["saga_id"],
                    "destination": world.dest,
                    "version_digest": saga["version_digest"],
                },
            )
            assert status_of(waiting) == "approval_required"

    anyio.run(scenario)
    seen = set(world.rows("SELECT actor, tool, status FROM events WHERE actor IN ('alice', 'bob')"))
    assert {
        ("alice", "saga.status", "ok"),
        ("alice", "saga.submit", "rejected"),
        ("alice", "approval.grant", "rejected"),
        ("bob", "corpus.read", "ok"),
        ("bob", "publish", "approval_required"),
    } <= seen
    assert not world.site.exists()

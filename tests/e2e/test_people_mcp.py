# ruff: noqa: F811  (pytest fixtures imported from test_mcp are parameters here)
"""People and permissions over MCP, with the official SDK client.

stdio: the caller is the user of PRESSROOM_TOKEN (closed mode); the server
refuses to start without a valid one. HTTP: the Bearer token is looked up in
the same user store on every call, so a revoke stops a session already open.
"""

from __future__ import annotations

import subprocess

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.test_mcp import (  # noqa: F401  (fixtures)
    BRIEF,
    CORPUS,
    PRESSROOM,
    World,
    http_server,
    http_session,
    leaves,
    status_of,
    stdio_session,
    structured,
    world,
)
from tests.support import in_process


def closed_world(world: World) -> None:
    """An admin (every role), erin (reviewer) and dana (author), made in this process: the
    people commands have tests of their own, these are about the MCP server's callers."""
    world.tokens.update(
        in_process.add_people(world.env(), world.root, {"erin": ["reviewer"], "dana": ["author"]})
    )
    world.token = world.tokens["admin"]


@pytest.mark.parametrize("token", [None, "pr_" + "z" * 43, "revoked"])
def test_stdio_refuses_to_start_without_a_valid_token(world: World, token: str | None) -> None:
    closed_world(world)
    if token == "revoked":
        token = world.tokens["dana"]
        world.cli("users", "revoke", "dana")
    env = world.process_env()
    env.pop("PRESSROOM_TOKEN", None)
    if token:
        env["PRESSROOM_TOKEN"] = token
    done = subprocess.run(
        [str(PRESSROOM), "mcp"],
        env=env,
        cwd=world.root,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 4, done.stderr
    assert "not authenticated" in done.stderr and "Traceback" not in done.stderr


def test_stdio_caller_is_the_tokens_user_and_needs_the_role(world: World) -> None:
    closed_world(world)
    submit_args = {"brief": BRIEF, "corpus": str(CORPUS), "destinations": [world.dest]}

    async def scenario() -> None:
        world.token = world.tokens["erin"]  # the MCP process below runs as erin (reviewer)
        async with stdio_session(world) as erin:
            refused = await erin.call_tool("saga.submit", submit_args)
            assert status_of(refused) == "rejected"
            assert "submit" in structured(refused)["reason"]
        world.token = world.tokens["dana"]
        async with stdio_session(world) as dana:
            made = await dana.call_tool("saga.submit", submit_args)
            assert status_of(made) == "ok", structured(made)

    anyio.run(scenario)
    rows = world.rows("SELECT actor, tool, status, auth_method FROM events WHERE tool = 'saga.submit'")
    assert ("erin", "saga.submit", "rejected", "token") in rows
    assert ("dana", "saga.submit", "ok", "token") in rows


def test_stdio_as_must_name_the_caller(world: World) -> None:
    closed_world(world)
    env = world.process_env()
    env["PRESSROOM_TOKEN"] = world.tokens["erin"]
    done = subprocess.run(
        [str(PRESSROOM), "mcp", "--as", "dana"],
        env=env,
        cwd=world.root,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "not the caller" in done.stderr, done.stderr


def test_http_revoked_token_is_refused_even_mid_session(world: World, http_server: str) -> None:
    saga = world.submit()
    bob = world.tokens["bob"]

    async def scenario() -> None:
        refused_mid_session = False
        try:
            async with http_session(http_server, bob) as session:
                first = await session.call_tool("saga.status", {"saga_id": saga["saga_id"]})
                assert status_of(first) == "ok"
                await anyio.to_thread.run_sync(lambda: world.cli("users", "revoke", "bob"))
                try:  # every request is authenticated again: this one gets 401
                    after = await session.call_tool("saga.status", {"saga_id": saga["saga_id"]})
                except MCPError:
                    refused_mid_session = True
                else:
                    refused_mid_session = after.is_error
        except Exception as exc:  # the SDK may also raise from its task group on the way out
            assert all(isinstance(leaf, MCPError) for leaf in leaves(exc)), exc
        assert refused_mid_session
        try:
            async with http_session(http_server, bob) as session:
                await session.list_tools()
        except Exception as exc:
            assert any(isinstance(leaf, MCPError) for leaf in leaves(exc)), exc
        else:
            raise AssertionError("a revoked token opened a session")

    anyio.run(scenario)
    assert world.rows("SELECT count(*) FROM events WHERE actor = 'bob'") == [(1,)]


def test_http_mcp_needs_closed_mode_and_the_old_token_list_is_retired(world: World) -> None:
    for extra in ({}, {"PRESSROOM_MCP_TOKENS": "x" * 20 + "=alice"}):
        done = subprocess.run(
            [str(PRESSROOM), "mcp", "--transport", "http", "--port", "1"],
            env=world.process_env(**extra),
            cwd=world.root,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert ("retired" if extra else "needs users") in done.stderr

"""Effect tools bound to their saga, through `pressroom mcp` and the official MCP client.

A recording webhook server stands in for a foreign destination: whatever a
caller names, it must receive no request at all. A succeeded saga's page
cannot be deleted through MCP. A `tools/call` whose arguments name a key
twice is refused by the harness's parse.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.e2e.test_mcp import PRESSROOM, STARTUP, World, stdio_session, structured, text_of
from tests.e2e.test_mcp import http_server as http_server  # noqa: F401  (a fixture)
from tests.e2e.test_mcp import world as world  # noqa: F401  (a fixture)
from tests.support.webhook_server import WebhookServer

CAPS = "publish,publish.status,saga.status,saga.show"
DIGEST = "0" * 64


@pytest.fixture
def published(world: World) -> dict[str, Any]:
    """A saga whose page is published (`succeeded`), made with the CLI."""
    saga = world.submit()
    world.cli("approve", saga["saga_id"], "--version", "1", "--as", "erin")
    status = world.cli("status", saga["saga_id"])
    assert status["state"] == "succeeded", status
    assert len(list(world.site.glob("*.md"))) == 1
    return status


def ledger_rows(world: World) -> list[tuple[Any, ...]]:
    return world.rows("SELECT key, tool, status FROM ledger WHERE tool LIKE 'publish%'")


def test_compensate_is_not_listed_and_a_succeeded_page_cannot_be_deleted(
    world: World, published: dict[str, Any]
) -> None:
    sid, digest = published["saga_id"], published["version_digest"]
    page = Path(published["destinations"][0]["receipt"]["path"])

    async def scenario() -> tuple[list[str], Any]:
        async with stdio_session(world, "--as", "mallory", "--capabilities", CAPS) as session:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            result = await session.call_tool(
                "publish.compensate",
                {"saga_id": sid, "destination": world.dest, "version_digest": digest},
            )
            return listed, result

    listed, result = anyio.run(scenario)
    assert "publish.compensate" not in listed
    assert result.is_error
    assert structured(result)["status"] == "rejected"
    assert page.exists(), "the published page is still there"
    assert world.cli("status", sid)["state"] == "succeeded"
    assert ledger_rows(world) == [(published["destinations"][0]["idempotency_key"], "publish", "done")]


def test_compensate_cannot_be_granted_over_mcp(world: World) -> None:
    done = subprocess.run(
        [str(PRESSROOM), "mcp", "--as", "mallory", "--capabilities", "publish.compensate"],
        env=world.process_env(),
        cwd=world.root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STARTUP,
    )
    assert done.returncode == 2, done.stderr
    assert "unknown capabilities" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("tool", ["publish.status", "publish.compensate"])
def test_a_foreign_destination_or_a_missing_saga_gets_no_request(
    world: World, published: dict[str, Any], tool: str
) -> None:
    sid, digest = published["saga_id"], published["version_digest"]
    before = ledger_rows(world)
    with WebhookServer() as hook:
        foreign = f"webhook:{hook.url}"
        calls = [
            {"saga_id": sid, "destination": foreign, "version_digest": digest},  # not the saga's
            {"saga_id": "f" * 32, "destination": foreign, "version_digest": DIGEST},  # no such saga
            {"saga_id": "no-such-saga", "destination": world.dest, "version_digest": DIGEST},
        ]

        async def scenario() -> list[Any]:
            async with stdio_session(world, "--as", "mallory", "--capabilities", CAPS) as session:
                return [await session.call_tool(tool, args) for args in calls]

        results = anyio.run(scenario)
        assert hook.received == [], "the foreign server received no request"
    for result in results:
        assert result.is_error and structured(result)["status"] == "rejected", structured(result)
    assert ledger_rows(world) == before, "no pending ledger row left behind"
    assert len(list(world.site.glob("*.md"))) == 1


def test_status_of_the_sagas_own_destination_is_refused_once_it_succeeded(
    world: World, published: dict[str, Any]
) -> None:
    args = {
        "saga_id": published["saga_id"],
        "destination": world.dest,
        "version_digest": published["version_digest"],
    }

    async def scenario() -> Any:
        async with stdio_session(world, "--as", "mallory", "--capabilities", CAPS) as session:
            return await session.call_tool("publish.status", args)

    result = anyio.run(scenario)
    assert structured(result)["status"] == "rejected"
    assert "succeeded" in text_of(result)


def _rpc(process: subprocess.Popen[str], line: str) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()
    answer: dict[str, Any] = json.loads(process.stdout.readline())
    return answer


def test_duplicate_keys_in_tool_arguments_are_refused_by_the_harness(world: World) -> None:
    """The official client cannot send a key twice, so this speaks JSON-RPC lines to the server itself."""
    saga = world.submit()
    sid = saga["saga_id"]
    process = subprocess.Popen(
        [str(PRESSROOM), "mcp", "--as", "mallory", "--capabilities", CAPS],
        env=world.process_env(),
        cwd=world.root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        assert "result" in _rpc(process, json.dumps(init))
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        duplicated = (
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"saga.status",'
            f'"arguments":{{"saga_id":"{"f" * 32}","saga_id":"{sid}"}}}}}}'
        )
        answer = _rpc(process, duplicated)
        plain = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "saga.status", "arguments": {"saga_id": sid}},
            }
        )
        control = _rpc(process, plain)
    finally:
        process.terminate()
        process.wait(timeout=10)
    result = answer["result"]
    assert result["isError"] is True
    assert "duplicate key 'saga_id'" in result["content"][0]["text"]
    assert control["result"]["isError"] is False  # the same call spelt once is answered
    refused = world.rows("SELECT detail FROM events WHERE tool = 'saga.status' AND status = 'rejected'")
    assert any("duplicate key" in row[0] for row in refused), "the refusal is an event"


def _answer(response: httpx.Response) -> dict[str, Any]:
    """A JSON-RPC answer, sent as JSON or as one server-sent event."""
    assert response.status_code == 200, (response.status_code, response.text[:300])
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = next(line[5:].strip() for line in response.text.splitlines() if line.startswith("data:"))
        answer: dict[str, Any] = json.loads(data)
        return answer
    out: dict[str, Any] = response.json()
    return out


def test_duplicate_keys_over_streamable_http_are_refused_too(world: World, http_server: str) -> None:
    saga = world.submit()
    headers = {
        "Authorization": f"Bearer {world.tokens['alice']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    with httpx.Client(timeout=60) as client:
        started = client.post(http_server, headers=headers, content=json.dumps(init))
        assert "result" in _answer(started)
        session = {**headers, "mcp-protocol-version": "2025-11-25"}
        if "mcp-session-id" in started.headers:
            session["mcp-session-id"] = started.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert client.post(http_server, headers=session, content=json.dumps(note)).status_code in (200, 202)
        duplicated = (
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"saga.status",'
            f'"arguments":{{"saga_id":"{"f" * 32}","saga_id":"{saga["saga_id"]}"}}}}}}'
        )
        answer = _answer(client.post(http_server, headers=session, content=duplicated))
    assert answer["result"]["isError"] is True
    assert "duplicate key 'saga_id'" in answer["result"]["content"][0]["text"]

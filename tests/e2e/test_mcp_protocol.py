"""The MCP revisions `pressroom mcp` speaks: what README's "MCP" section states, what the
pinned SDK negotiates, and what a real session with `pressroom mcp` (stdio) gets.

The README sentence is read and compared with the SDK's version registry, so bumping the
SDK without the README (or the other way round) fails here; then the SDK's own client
connects both ways (`initialize`, and `Client`'s default, `server/discover` first) and
raw `initialize` requests ask for an older revision and for one no release has."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client, StdioServerParameters
from mcp.types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from orchestrator.entrypoints.mcp_server import HANDSHAKE_REVISION, MODERN_REVISION, PROTOCOL_REVISIONS
from tests.conftest import PRESSROOM, ROOT, base_env

pytestmark = pytest.mark.timeout(120)

STATED = re.compile(
    r"It speaks the MCP revisions of the `mcp` SDK it pins \((?P<sdk>[\d.]+)\): `(?P<modern>[\d-]+)` "
    r"through `server/discover` \(the SDK's `Client` asks for it first\), and `(?P<handshake>[\d-]+)` "
    r"through `initialize`, whose answer's `protocolVersion` is `(?P<answer>[\d-]+)` unless the client "
    r"asked for (?P<older>[^.]+), which it then gets\."
)
REVISION = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def mcp_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## MCP\n", 1)[1].split("\n## ", 1)[0]
    return " ".join(section.split())


def stated() -> dict[str, str]:
    found = STATED.search(mcp_section())
    assert found is not None, "README's MCP section no longer states the revisions in its usual sentence"
    return found.groupdict()


def test_readme_states_the_revisions_the_pinned_sdk_speaks() -> None:
    said = stated()
    sdk = metadata.version("mcp")
    assert sdk.startswith(said["sdk"] + "."), f"README names SDK {said['sdk']}, the pinned one is {sdk}"
    assert said["modern"] == LATEST_MODERN_VERSION and MODERN_PROTOCOL_VERSIONS == (said["modern"],)
    assert said["handshake"] == said["answer"] == LATEST_HANDSHAKE_VERSION
    older = REVISION.findall(said["older"])
    assert older == [v for v in reversed(HANDSHAKE_PROTOCOL_VERSIONS) if v != LATEST_HANDSHAKE_VERSION]
    # Every revision the section names is one the SDK knows, and it names every one it speaks.
    named = set(REVISION.findall(mcp_section()))
    assert named == set(HANDSHAKE_PROTOCOL_VERSIONS) | set(MODERN_PROTOCOL_VERSIONS)
    assert named <= set(KNOWN_PROTOCOL_VERSIONS)
    assert (HANDSHAKE_REVISION, MODERN_REVISION) == (said["handshake"], said["modern"])


def raw_initialize(env: dict[str, str], cwd: Path, version: str) -> str:
    """`initialize` asking for `version`, written to `pressroom mcp` by hand; the revision answered."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    done = subprocess.run(
        [PRESSROOM, "mcp"],
        input=json.dumps(request) + "\n",
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert PROTOCOL_REVISIONS in done.stderr  # it names them when it starts
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1, answer
    revision: str = answer["result"]["protocolVersion"]
    return revision


def test_a_session_with_pressroom_mcp_gets_the_stated_revisions(tmp_path: Path) -> None:
    said = stated()
    oldest = REVISION.findall(said["older"])[-1]
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    params = StdioServerParameters(command=PRESSROOM, args=["mcp"], env=env, cwd=str(tmp_path))
    got: dict[str, str | None] = {}

    async def legacy() -> None:
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            result = client.session.initialize_result
            assert result is not None and result.server_info.name == "pressroom"
            got["initialize"] = result.protocol_version
            got["initialize session"] = client.session.protocol_version

    async def default() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            assert client.session.initialize_result is None  # discovered, no handshake
            got["default"] = client.session.protocol_version

    def asking(version: str) -> Callable[[], Awaitable[None]]:
        async def ask() -> None:
            got[version] = await anyio.to_thread.run_sync(raw_initialize, env, tmp_path, version)

        return ask

    async def scenario() -> None:
        with anyio.fail_after(90):
            async with anyio.create_task_group() as group:
                for run in (legacy, default, asking(oldest), asking("1999-01-01")):
                    group.start_soon(run)

    anyio.run(scenario)
    assert got == {
        "initialize": said["answer"],
        "initialize session": said["answer"],
        "default": said["modern"],
        oldest: oldest,
        "1999-01-01": said["answer"],
    }

"""`pressroom mcp --transport http` bound to every address (0.0.0.0), attacked the way a
DNS-rebinding page would: the browser sends the attacker's name as `Host` and the
attacker's page as `Origin`. Two real servers, one without `PRESSROOM_MCP_ALLOWED_ORIGINS`
and one with it; each request is an `initialize` over raw HTTP, with a user's token
unless said otherwise (a browser would not have one: the refusal comes before the token
is read)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from orchestrator.entrypoints.mcp_server import PROTOCOL_REVISIONS
from tests.conftest import PRESSROOM, base_env, free_port
from tests.support import in_process
from tests.support.processes import Proc, wait_until

pytestmark = pytest.mark.timeout(120)

LISTED = "https://mcp.example.test"
INITIALIZE = (
    '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", '
    '"capabilities": {}, "clientInfo": {"name": "attacker", "version": "0"}}}'
)
EVIL_PAGE = "https://evil.example"


@dataclass
class Server:
    port: int
    token: str

    def post(self, *, host: str | None = None, origin: str | None = None, token: bool = True) -> int:
        """The status of an `initialize` sent to 127.0.0.1 with these `Host` and `Origin`."""
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if host is not None:
            headers["host"] = host
        if origin is not None:
            headers["origin"] = origin
        if token:
            headers["authorization"] = f"Bearer {self.token}"
        url = f"http://127.0.0.1:{self.port}/mcp"
        return httpx.post(url, content=INITIALIZE, headers=headers, timeout=30).status_code


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    """(bound to 0.0.0.0 without the setting, bound to 0.0.0.0 with LISTED allowed)."""
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    token = in_process.add_people(env, tmp_path, {}, admin_roles=("admin", "author"))["admin"]
    ports = free_port(), free_port()
    procs = [
        Proc(
            f"mcp-{n}",
            [PRESSROOM, "mcp", "--transport", "http", "--host", "0.0.0.0", "--port", str(port)],
            {**env, **extra},
            tmp_path,
        )
        for n, (port, extra) in enumerate(
            zip(ports, ({}, {"PRESSROOM_MCP_ALLOWED_ORIGINS": LISTED}), strict=True)
        )
    ]

    def up(port: int) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=2).status_code == 401
        except httpx.HTTPError:
            return False

    try:
        for proc, port in zip(procs, ports, strict=True):
            wait_until(lambda: proc.popen.poll() is not None or up(port), timeout=60, what=proc.name)  # noqa: B023
            assert proc.popen.poll() is None, proc.output()
        yield Server(ports[0], token), Server(ports[1], token)
    finally:
        for proc in procs:
            proc.stop()
    logs = "".join(proc.output() for proc in procs)
    assert "Traceback" not in logs
    assert "without PRESSROOM_MCP_ALLOWED_ORIGINS" in procs[0].output()
    assert "without PRESSROOM_MCP_ALLOWED_ORIGINS" not in procs[1].output()
    assert all(PROTOCOL_REVISIONS in proc.output() for proc in procs)


def this_machines_address() -> str | None:
    """A non-loopback address of this machine, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_a_server_bound_to_every_address_serves_only_the_hosts_and_origins_it_was_told_about(
    servers: tuple[Server, Server],
) -> None:
    default, listed = servers
    for server in servers:
        assert server.post() == 200  # a client that is not a browser, reaching it by loopback
        assert server.post(origin=f"http://localhost:{server.port}") == 200
        assert server.post(origin=EVIL_PAGE) == 403
        assert server.post(origin=EVIL_PAGE, token=False) == 403  # refused before the token is read
        assert server.post(origin="null") == 403  # a sandboxed page
        assert server.post(host=f"evil.example:{server.port}") == 421  # the rebinding name
        assert server.post(host=f"evil.example:{server.port}", token=False) == 421
        assert server.post(host=f"localhost.evil.example:{server.port}") == 421
    # Without the setting, a name or origin the server was not told about is foreign.
    assert default.post(host="mcp.example.test", origin=LISTED) == 421
    assert default.post(origin=LISTED) == 403
    # With it, that origin's pages and clients of its URL pass, and nothing more.
    assert listed.post(host="mcp.example.test", origin=LISTED) == 200
    assert listed.post(host="mcp.example.test") == 200
    assert listed.post(host="mcp.example.test", origin=EVIL_PAGE) == 403
    assert listed.post(origin=f"{LISTED}:8443") == 403
    assert listed.post(origin="http://mcp.example.test") == 403  # another scheme is another origin
    assert listed.post(host="mcp.example.test:8443") == 421
    # An address of this machine the server was not told about is foreign too.
    address = this_machines_address()
    if address is not None:
        for server in servers:
            assert server.post(host=f"{address}:{server.port}") == 421


def test_an_origin_list_that_does_not_parse_is_refused_at_start(tmp_path: Path) -> None:
    value = "https://mcp.example.test *"
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_MCP_ALLOWED_ORIGINS=value
    )
    done = subprocess.run(
        [PRESSROOM, "mcp", "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "PRESSROOM_MCP_ALLOWED_ORIGINS" in done.stderr
    assert "'*'" in done.stderr

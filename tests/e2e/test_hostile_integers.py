"""Oversized integers from outside are bad input on every surface, never a 500 or a crash.

Python refuses to turn a string of more than 4300 digits into an int
(ValueError), and PostgreSQL's integer stops at 2**31 - 1. An attacker sent
such numbers in a JSON body, a path, a query, a form, an MCP message over
stdio and over HTTP, and a CLI option. Each must answer 400 with a one-line
JSON error (exit 2 on the CLI; a JSON-RPC error over MCP), and the server
must keep running.
"""

from __future__ import annotations

import json
import selectors
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import types

from tests.conftest import PRESSROOM, SAMPLE_CORPUS, Cli, base_env, free_port
from tests.support import in_process
from tests.support.processes import Proc, wait_until
from tests.support.web import form_token, served

pytestmark = pytest.mark.e2e

BIG = "9" * 5000
WIDE = str(2**31)  # converts, but no version or limit is that large
BRIEF = "The history of the Millbrook library branches and the bookmobile"


@pytest.fixture
def open_site(tmp_path: Path) -> Iterator[tuple[str, Cli, str]]:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    cli = Cli(env, tmp_path)
    dest = f"site:{tmp_path / 'site'}"
    sid = in_process.submit(
        env, tmp_path, brief=BRIEF, corpus=SAMPLE_CORPUS, destinations=[dest], actor="dana"
    )
    with served(env, tmp_path) as url:
        yield url, cli, sid


def one_line_json_400(answer: httpx.Response) -> None:
    assert answer.status_code == 400, (answer.status_code, answer.text[:300])
    error = answer.json()["error"]
    assert "\n" not in error and "Traceback" not in error and len(error) < 300, error


def test_http_bodies_paths_and_queries(open_site: tuple[str, Cli, str]) -> None:
    url, cli, sid = open_site
    with httpx.Client(base_url=url, timeout=60) as client:
        for number in (BIG, WIDE, "-" + BIG):
            for route in ("approve", "fork"):
                answer = client.post(
                    f"/api/sagas/{sid}/{route}",
                    content=f'{{"version": {number}, "as": "erin"}}',
                    headers={"content-type": "application/json"},
                )
                one_line_json_400(answer)
            answer = client.post(
                "/api/sagas",
                content=f'{{"brief": "b", "corpus": "c", "destinations": [], "as": "x", "n": {number}}}',
                headers={"content-type": "application/json"},
            )
            one_line_json_400(answer)
        for number in (BIG, WIDE):
            one_line_json_400(client.get(f"/api/sagas/{sid}/versions/{number}"))
            one_line_json_400(client.get(f"/api/sagas/{sid}/diff/1/{number}"))
        for number in (BIG, WIDE, "\u00b2"):  # a superscript two passes str.isdigit()
            one_line_json_400(client.get("/api/sagas", params={"limit": number}))
        for path in (f"/sagas/{sid}/versions/{BIG}", f"/sagas/{sid}/diff/1/{BIG}", f"/?limit={BIG}"):
            assert client.get(path).status_code == 400, path
        assert client.get(f"/sagas/{sid}/diff", params={"a": "1", "b": BIG}).status_code == 400
        assert client.get(f"/api/sagas/{sid}").status_code == 200  # still serving
    assert cli.json("status", sid)["state"] == "ready-for-review"


def test_web_forms(open_site: tuple[str, Cli, str]) -> None:
    url, cli, sid = open_site
    with httpx.Client(base_url=url, timeout=60, follow_redirects=False) as client:
        page = client.get(f"/sagas/{sid}")
        assert page.status_code == 200
        token = form_token(page.text)
        for number in (BIG, WIDE):
            for route, field in (("approve", "version"), ("fork", "fork_version")):
                answer = client.post(
                    f"/sagas/{sid}/{route}",
                    data={"form_token": token, field: number, "name": "erin"},
                    headers={"origin": url},
                )
                assert answer.status_code == 400, (route, answer.status_code, answer.text[:300])
                assert "whole number" in answer.text  # the saga page, with the one-line reason
    assert cli.json("status", sid)["state"] == "ready-for-review"


def test_cli_options(open_site: tuple[str, Cli, str]) -> None:
    _, cli, sid = open_site
    for args in (
        ("approve", sid, "--version", BIG, "--as", "erin"),
        ("show", sid, "--version", BIG),
        ("diff", sid, "1", BIG),
        ("fork", sid, "--version", BIG, "--as", "olga"),
    ):
        done = cli.run(*args)
        assert done.returncode == 2, (args[0], done.returncode, done.stderr[:300])
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


# -- MCP over stdio: a JSON-RPC error, and the server goes on --------------------------
class Stdio:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.selector = selectors.DefaultSelector()
        assert proc.stdout is not None
        self.selector.register(proc.stdout, selectors.EVENT_READ)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        assert self.proc.stdout is not None
        if not self.selector.select(timeout):
            raise AssertionError("no answer from pressroom mcp")
        line = self.proc.stdout.readline()
        assert line, "pressroom mcp closed its output"
        answer: dict[str, Any] = json.loads(line)
        return answer


def test_mcp_stdio_answers_a_json_rpc_error_and_keeps_running(tmp_path: Path) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    log = (tmp_path / "mcp.log").open("w")
    proc = subprocess.Popen(
        [PRESSROOM, "mcp", "--as", "dana"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    mcp = Stdio(proc)
    try:
        hello = {"protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {}}
        mcp.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {**hello, "clientInfo": {"name": "t", "version": "1"}},
                }
            )
        )
        assert mcp.receive()["id"] == 1
        mcp.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        call = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "saga.status", '
        mcp.send(call + f'"arguments": {{"saga_id": "x", "n": {BIG}}}}}}}')
        refused = mcp.receive()
        assert refused["id"] == 2 and refused["error"]["code"] == -32602, refused
        assert "too many digits" in refused["error"]["message"]
        mcp.send(f'{{"jsonrpc": "2.0", "id": "s", "method": "ping", "params": {{"n": {BIG}}}}}')
        assert mcp.receive()["id"] == "s"  # any method, answered by its id
        mcp.send(f'{{"jsonrpc": "2.0", "id": {BIG}, "method": "ping"}}')  # no id to answer: dropped
        mcp.send('{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}')
        listed = mcp.receive()
        assert listed["id"] == 3 and listed["result"]["tools"], listed
        assert proc.poll() is None
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()
        log.close()
    assert "Traceback" not in (tmp_path / "mcp.log").read_text()


def test_mcp_http_answers_400_with_a_json_rpc_error(tmp_path: Path) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    token = in_process.add_people(env, tmp_path, {}, admin_roles=("admin",))["admin"]
    port = free_port()
    proc = Proc("mcp-http", [PRESSROOM, "mcp", "--transport", "http", "--port", str(port)], env, tmp_path)
    url = f"http://127.0.0.1:{port}/mcp"

    def up() -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 401
        except httpx.HTTPError:
            return False

    try:
        wait_until(lambda: proc.popen.poll() is not None or up(), timeout=60, what="pressroom mcp over HTTP")
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        body = f'{{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {{"n": {BIG}}}}}'
        assert httpx.post(url, content=body, headers=headers, timeout=30).status_code == 401  # no token
        answer = httpx.post(
            url, content=body, headers={**headers, "authorization": f"Bearer {token}"}, timeout=30
        )
        assert answer.status_code == 400, answer.text[:300]
        assert answer.json()["id"] == 7 and answer.json()["error"]["code"] == -32602
        assert up()  # still serving
    finally:
        proc.stop()

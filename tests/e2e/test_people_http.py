"""People and permissions over HTTP: `pressroom serve` as a process, requests over a real socket.

Closed mode: every /api route needs `Authorization: Bearer TOKEN` of an active
user (401), a role for what it does (403), and an `as` that names the caller
(400). Errors are JSON, never a 500.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import PRESSROOM, base_env, free_port
from tests.support import in_process
from tests.support.processes import Processes, wait_until

BRIEF = "the history of the library network"
# An admin grants only roles they hold, so the first one holds those it hands out.
ADMIN_ROLES = ("admin", "author", "reviewer")


def cli_json(env: dict[str, str], *args: str, token: str | None = None) -> dict[str, Any]:
    full = {**env, **({"PRESSROOM_TOKEN": token} if token else {})}
    done = subprocess.run([PRESSROOM, *args, "--json"], env=full, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args}: {done.stderr}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


class Server:
    def __init__(self, url: str, env: dict[str, str], tokens: dict[str, str], procs: Processes) -> None:
        self.url, self.env, self.tokens, self.procs = url, env, tokens, procs

    def call(self, method: str, path: str, token: str | None = None, body: Any = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with httpx.Client(base_url=self.url, timeout=60) as client:
            response = client.request(method, path, headers=headers, json=body)
        assert response.status_code < 500, response.text
        return response


def start_server(tmp_path: Path, users: bool) -> Iterator[Server]:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    tokens: dict[str, str] = {}
    if users:  # made in this process (`users add` has tests/e2e/test_people_cli.py)
        others = {"dana": ["author"], "erin": ["reviewer"], "bob": ["author", "reviewer"]}
        tokens = in_process.add_people(env, tmp_path, others, admin_roles=ADMIN_ROLES)
    port = free_port()
    procs = Processes(env, tmp_path)
    proc = procs.start("serve", PRESSROOM, "serve", "--port", str(port))
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/api/sagas", timeout=2).status_code in (200, 401)
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=60, what="pressroom serve")
        yield Server(url, env, tokens, procs)
    finally:
        procs.stop_all()
        print(proc.output()[-2000:])


@pytest.fixture
def closed(tmp_path: Path) -> Iterator[Server]:
    yield from start_server(tmp_path, users=True)


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[Server]:
    yield from start_server(tmp_path, users=False)


def submit_body(site: Path, **extra: Any) -> dict[str, Any]:
    return {
        "brief": BRIEF,
        "corpus": str(Path(__file__).resolve().parents[2] / "roles" / "sample_corpus"),
        "destinations": [f"site:{site}"],
        **extra,
    }


def test_serve_says_its_mode_and_open_mode_works_as_before(open_server: Server, tmp_path: Path) -> None:
    assert "open mode" in open_server.procs.procs[0].output()
    site = tmp_path / "site"
    saga = open_server.call("POST", "/api/sagas", body=submit_body(site, **{"as": "sam"})).json()
    sid = saga["saga_id"]
    refused = open_server.call("POST", f"/api/sagas/{sid}/approve", body={"version": 1, "as": "s\u0430m"})
    assert refused.status_code == 403 and refused.json()["kind"] == "SelfApproval"
    ok = open_server.call("POST", f"/api/sagas/{sid}/approve", body={"version": 1, "as": "erin"})
    assert ok.status_code == 200, ok.text
    assert open_server.call("GET", f"/api/sagas/{sid}").json()["state"] == "succeeded"


def test_closed_mode_tokens_roles_and_as(closed: Server, tmp_path: Path) -> None:
    assert "closed mode" in closed.procs.procs[0].output()
    site = tmp_path / "site"
    t = closed.tokens
    for token in (None, "pr_" + "y" * 43, "garbage"):
        for method, path, body in (("GET", "/api/sagas", None), ("POST", "/api/sagas", submit_body(site))):
            answer = closed.call(method, path, token, body)
            assert answer.status_code == 401, (token, path, answer.text)
            assert answer.json()["kind"] == "NotAuthenticated"
    lacking = closed.call("POST", "/api/sagas", t["erin"], submit_body(site))  # a reviewer may not submit
    assert lacking.status_code == 403 and lacking.json()["kind"] == "NotPermitted"
    as_other = closed.call("POST", "/api/sagas", t["dana"], submit_body(site, **{"as": "erin"}))
    assert as_other.status_code == 400 and "not the caller" in as_other.json()["error"]
    created = closed.call("POST", "/api/sagas", t["bob"], submit_body(site))
    assert created.status_code == 201, created.text
    sid = created.json()["saga_id"]
    # the submitter may not approve, under any spelling of their name; nor may an author
    for body in ({"version": 1}, {"version": 1, "as": "Bob"}, {"version": 1, "as": "\uff42\uff4f\uff42"}):
        answer = closed.call("POST", f"/api/sagas/{sid}/approve", t["bob"], body)
        assert answer.status_code == 403 and answer.json()["kind"] == "SelfApproval", answer.text
    assert closed.call("POST", f"/api/sagas/{sid}/approve", t["dana"], {"version": 1}).status_code == 403
    # another user's name in `as`
    spoof = closed.call("POST", f"/api/sagas/{sid}/approve", t["bob"], {"version": 1, "as": "erin"})
    assert spoof.status_code == 400
    assert not site.exists()
    # a revoked reviewer's token stops at once
    subprocess.run(
        [PRESSROOM, "users", "revoke", "erin"],
        env={**closed.env, "PRESSROOM_TOKEN": t["admin"]},
        check=True,
        capture_output=True,
    )
    revoked = closed.call("POST", f"/api/sagas/{sid}/approve", t["erin"], {"version": 1})
    assert revoked.status_code == 401
    assert closed.call("GET", f"/api/sagas/{sid}", t["erin"]).status_code == 401
    assert not site.exists()
    # a reviewer who is neither submitter nor author approves and it publishes
    grace = cli_json(closed.env, "users", "add", "grace", "--role", "reviewer", token=t["admin"])["token"]
    approved = closed.call("POST", f"/api/sagas/{sid}/approve", grace, {"version": 1, "as": "grace"})
    assert approved.status_code == 200, approved.text
    assert closed.call("GET", f"/api/sagas/{sid}", grace).json()["state"] == "succeeded"
    history = closed.call("GET", f"/api/sagas/{sid}/history", t["dana"]).json()["events"]
    assert any(e["actor"] == "grace" and e["kind"] == "transition" for e in history)

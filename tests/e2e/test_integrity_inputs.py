"""Hostile input gets a one-line refusal with the documented code, never a traceback or a 500.

Through the console script (exit 2 bad input, 3 not found) and through
`pressroom serve` over a real socket (a 4xx JSON error).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Cli, base_env, free_port
from tests.support import in_process
from tests.support.processes import PRESSROOM, Processes

BRIEF = "history of the library network"


def submit(cli: Cli, corpus: Path, *dests: str) -> dict[str, Any]:
    args = ["submit", "--brief", BRIEF, "--corpus", str(corpus), "--as", "dana"]
    for dest in dests:
        args += ["--dest", dest]
    return cli.json(*args)


def submitted(cli: Cli, corpus: Path, dest: str) -> str:
    """A saga made in this process, for a test about another command; its id."""
    return in_process.submit(cli.env, cli.cwd, brief=BRIEF, corpus=corpus, destinations=[dest], actor="dana")


def refused(cli: Cli, code: int, *args: str) -> str:
    done = cli.run(*args)
    assert done.returncode == code, (args[:2], done.returncode, done.stderr[-500:])
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


# -- the console script -----------------------------------------------------------
def test_an_expiry_beyond_any_date_is_bad_input(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    sid = submitted(cli, corpus, f"site:{tmp_path / 'site'}")
    for huge in ("99999999999d", "9" * 400, "1e309"):
        refused(cli, 2, "approve", sid, "--version", "1", "--as", "erin", "--expires-in", huge)
    assert cli.json("status", sid)["state"] == "ready-for-review"


def test_a_huge_saga_id_is_bad_input_and_wildcards_match_nothing(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    first = submitted(cli, corpus, f"site:{tmp_path / 'a'}")
    submitted(cli, corpus, f"site:{tmp_path / 'b'}")
    assert "at most 64" in refused(cli, 2, "status", "a" * 100_000)
    refused(cli, 2, "show", "f" * 100_000)
    for pattern in ("%%%%%%", "______", first[:5] + "%", first[:5] + "_", first[:6] + "%"):
        refused(cli, 3, "status", pattern)
    assert cli.json("status", first[:8])["saga_id"] == first  # a true prefix still works
    huge = "9" * 30  # no integer column holds it
    refused(cli, 3, "show", first, "--version", huge)
    refused(cli, 3, "diff", first, "1", huge)


def test_destinations_get_one_spelling_at_submit(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    folder = tmp_path / "x"
    out = submit(cli, corpus, f"site:/{folder}/./")
    assert [d["uri"] for d in out["destinations"]] == [f"site:{folder}"]
    refused(
        cli,
        2,
        "submit",
        "--brief",
        BRIEF,
        "--corpus",
        str(corpus),
        "--as",
        "dana",
        "--dest",
        f"site:{folder}",
        "--dest",
        f"site://{folder}/",
    )
    refused(
        cli,
        2,
        "submit",
        "--brief",
        BRIEF,
        "--corpus",
        str(corpus),
        "--as",
        "dana",
        "--dest",
        f"site:{folder}/\x1b[2Jevil",
    )
    refused(
        cli,
        2,
        "submit",
        "--brief",
        BRIEF,
        "--corpus",
        str(corpus),
        "--as",
        "dana",
        "--dest",
        f"git:{folder}\u202e",
    )
    assert "tests only" in refused(
        cli,
        2,
        "submit",
        "--brief",
        BRIEF,
        "--corpus",
        str(corpus),
        "--as",
        "dana",
        "--dest",
        "memory:anything",
    )


# -- the HTTP API over a socket -------------------------------------------------------
@pytest.fixture
def api(tmp_path: Path, sqlite_url: str) -> Iterator[httpx.Client]:
    port = free_port()
    procs = Processes(base_env(PRESSROOM_DATABASE_URL=sqlite_url, PRESSROOM_BROKER_URL="inline://"), tmp_path)
    server = procs.start("serve", PRESSROOM, "serve", "--port", str(port))
    deadline = time.monotonic() + 60
    try:
        while True:
            assert server.popen.poll() is None, server.output()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, server.output()
                time.sleep(0.05)  # polling for readiness, nothing else
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            yield client
        assert "Traceback" not in server.output(), server.output()
    finally:
        procs.stop_all()


def json_error(response: httpx.Response, code: int) -> str:
    assert response.status_code == code, (response.status_code, response.text[:500])
    body = response.json()
    assert set(body) == {"error", "kind"}, body
    return str(body["error"])


def raw_get_status(api: httpx.Client, path: str) -> int:
    url = api.base_url
    with socket.create_connection((str(url.host), int(url.port or 80)), timeout=60) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        head = conn.makefile("rb").readline().decode()
    return int(head.split()[1])


def post_raw(api: httpx.Client, path: str, raw: str) -> httpx.Response:
    return api.post(path, content=raw.encode(), headers={"content-type": "application/json"})


def test_api_refusals_are_4xx_json(api: httpx.Client, corpus: Path, tmp_path: Path) -> None:
    made = api.post(
        "/api/sagas",
        json={
            "brief": BRIEF,
            "corpus": str(corpus),
            "destinations": [f"site:{tmp_path / 'site'}"],
            "as": "dana",
        },
    )
    assert made.status_code == 201, made.text
    sid = made.json()["saga_id"]

    approve = api.post(
        f"/api/sagas/{sid}/approve", json={"version": 1, "as": "erin", "expires_in": "99999999999d"}
    )
    assert "at most" in json_error(approve, 400)

    deep = "[" * 100_000 + "]" * 100_000
    assert "deeper" in json_error(post_raw(api, "/api/sagas", deep), 400)
    assert "deeper" in json_error(
        post_raw(api, f"/api/sagas/{sid}/approve", '{"version": ' + deep + "}"), 400
    )

    twice = json.dumps({"version": 1, "as": "erin"})[:-1] + ', "as": "mallory"}'
    assert "duplicate key 'as'" in json_error(post_raw(api, f"/api/sagas/{sid}/approve", twice), 400)
    assert api.get(f"/api/sagas/{sid}").json()["state"] == "ready-for-review"

    json_error(api.get("/api/sagas/" + "a" * 10_000), 400)
    # Too long for httpx to send: written to the socket by hand. The server may refuse the request line itself.
    assert 400 <= raw_get_status(api, "/api/sagas/" + "a" * 100_000) < 500
    # A number too large to be a version is bad input (400), like any oversized integer.
    assert "whole number" in json_error(api.get(f"/api/sagas/{sid}/versions/{'9' * 30}"), 400)
    assert "whole number" in json_error(api.get(f"/api/sagas/{sid}/diff/1/{'9' * 30}"), 400)
    for pattern in ("%25%25%25%25%25%25", "______", sid[:5] + "_", sid[:5] + "%25"):
        json_error(api.get(f"/api/sagas/{pattern}"), 404)

    for dest in ("memory:x", f"site:{tmp_path}/a\u0007b"):
        body = {"brief": BRIEF, "corpus": str(corpus), "destinations": [dest], "as": "dana"}
        json_error(api.post("/api/sagas", json=body), 400)

"""Outbound calls bounded, each attack as it was reported, through the real entry points.

Webhooks to loopback, link-local and metadata addresses (however spelled, and
names resolving to them) are refused at submit (exit 2 / HTTP 400, one line
naming the destination) and again at the effect (nothing sent, the saga
fails with the reason); one endpoint spelled six ways is one destination; a
saga holds at most PRESSROOM_MAX_DESTINATIONS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.entrypoints.http import create_app
from tests.conftest import SAMPLE_CORPUS, Cli, base_env, free_port
from tests.support.webhook_server import ReferenceReceiver

BRIEF = "history of the library network"


def strict_cli(tmp_path: Path, sqlite_url: str, allow: str = "") -> Cli:
    """The console script with PRESSROOM_WEBHOOK_ALLOW as given (empty: the default, nothing)."""
    env = base_env(PRESSROOM_DATABASE_URL=sqlite_url, PRESSROOM_BROKER_URL="inline://")
    env["PRESSROOM_WEBHOOK_ALLOW"] = allow
    return Cli(env, tmp_path)


def submit_args(corpus: Path, *dests: str) -> list[str]:
    args = ["submit", "--brief", BRIEF, "--corpus", str(corpus), "--as", "dana"]
    for dest in dests:
        args += ["--dest", dest]
    return args


def no_sagas(cli: Cli) -> bool:
    return cli.json("status")["sagas"] == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://[::1]:9/hook",
        "http://2130706433:9/hook",
        "http://0x7f.1:9/hook",
        "http://127.1:9/hook",
        "http://[::ffff:127.0.0.1]:9/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest",
        "http://10.0.0.5/hook",
        "http://localhost:9/hook",
    ],
)
def test_a_non_public_webhook_is_refused_at_submit(
    tmp_path: Path, corpus: Path, sqlite_url: str, url: str
) -> None:
    cli = strict_cli(tmp_path, sqlite_url)
    done = cli.run(*submit_args(corpus, f"site:{tmp_path / 'site'}", f"webhook:{url}"))
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "webhook:" in line and "PRESSROOM_WEBHOOK_ALLOW" in line and "Traceback" not in done.stderr
    assert no_sagas(cli)


def test_the_allow_list_lets_a_named_address_through(tmp_path: Path, corpus: Path, sqlite_url: str) -> None:
    cli = strict_cli(tmp_path, sqlite_url, allow="127.0.0.0/8")
    out = cli.json(*submit_args(corpus, "webhook:http://2130706433:9/hook"))
    assert [d["uri"] for d in out["destinations"]] == ["webhook:http://127.0.0.1:9/hook"]


def test_six_spellings_of_one_endpoint_are_one_destination(
    tmp_path: Path, corpus: Path, sqlite_url: str
) -> None:
    cli = strict_cli(tmp_path, sqlite_url, allow="127.0.0.1")
    port = free_port()
    spellings = [
        f"http://127.0.0.1:{port}/hook",
        f"HTTP://127.0.0.1:{port}/hook",
        f"http://2130706433:{port}/hook",
        f"http://127.1:{port}/%68ook",
        f"http://0x7f.0.0.1:{port}/./hook",
        f"http://127.0.0.1.:{port}/x/../hook",
    ]
    both = cli.run(*submit_args(corpus, *(f"webhook:{s}" for s in spellings)))
    assert both.returncode == 2
    [line] = both.stderr.strip().splitlines()
    assert f"webhook:http://127.0.0.1:{port}/hook is named twice" in line
    assert no_sagas(cli)
    stored = set()
    for spelling in spellings:
        out = cli.json(*submit_args(corpus, f"webhook:{spelling}"))
        stored |= {d["uri"] for d in out["destinations"]}
    assert stored == {f"webhook:http://127.0.0.1:{port}/hook"}


def test_a_fragment_is_refused(tmp_path: Path, corpus: Path, sqlite_url: str) -> None:
    cli = strict_cli(tmp_path, sqlite_url, allow="127.0.0.1")
    done = cli.run(*submit_args(corpus, "webhook:http://127.0.0.1:9/hook#a"))
    assert done.returncode == 2 and "fragment" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_more_destinations_than_the_limit_are_refused(tmp_path: Path, corpus: Path, sqlite_url: str) -> None:
    cli = strict_cli(tmp_path, sqlite_url)
    dests = [f"site:{tmp_path / f'site-{n}'}" for n in range(21)]
    done = cli.run(*submit_args(corpus, *dests))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "21 destinations" in line and "at most 20" in line and "PRESSROOM_MAX_DESTINATIONS" in line
    assert no_sagas(cli)
    cli.env["PRESSROOM_MAX_DESTINATIONS"] = "2"
    assert cli.run(*submit_args(corpus, *dests[:3])).returncode == 2
    assert cli.json(*submit_args(corpus, *dests[:2]))["state"] == "ready-for-review"


# -- the HTTP API ----------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite", broker_url="inline://", secret="s", webhook_allow=""
    )
    app = build_app(settings)
    with TestClient(create_app(app)) as client:
        yield client
    app.close()


@pytest.mark.parametrize(
    ("dests", "said"),
    [
        (["webhook:http://127.0.0.1:9/hook"], "loopback"),
        (["webhook:http://[::1]:9/hook"], "loopback"),
        (["webhook:http://2130706433:9/hook"], "loopback"),
        (["webhook:http://169.254.169.254/latest"], "metadata"),
        (["webhook:http://localhost:9/hook"], "loopback"),
        (["webhook:https://Example.com:443/h", "webhook:https://example.com./h"], "named twice"),
        ([f"site:/tmp/pressroom-limit-{n}" for n in range(21)], "at most 20"),
    ],
)
def test_the_api_refuses_the_same_with_a_400(api: TestClient, dests: list[str], said: str) -> None:
    body = {"brief": BRIEF, "corpus": str(SAMPLE_CORPUS), "destinations": dests, "as": "sam"}
    response = api.post("/api/sagas", json=body)
    assert response.status_code == 400, response.text
    error = json.dumps(response.json())
    assert said in error
    assert api.get("/api/sagas").json()["sagas"] == []


# -- at the effect: the host is checked again, resolved again --------------------------


@pytest.mark.parametrize(
    ("host", "allowed_at_submit"), [("localhost", "localhost"), ("127.0.0.1", "127.0.0.1")]
)
def test_a_host_allowed_at_submit_but_not_when_publishing_is_refused_and_nothing_is_sent(
    tmp_path: Path, corpus: Path, sqlite_url: str, host: str, allowed_at_submit: str
) -> None:
    site = tmp_path / "site"
    with ReferenceReceiver(tmp_path) as receiver:
        hook = f"webhook:http://{host}:{receiver.port}/hook"
        submitting = strict_cli(tmp_path, sqlite_url, allow=allowed_at_submit)
        sid = submitting.json(*submit_args(corpus, f"site:{site}", hook))["saga_id"]
        publishing = strict_cli(tmp_path, sqlite_url)  # the publishing process allows nothing
        approved = publishing.run("approve", sid, "--version", "1", "--as", "erin")
        assert approved.returncode == 6 and "ended failed" in approved.stderr
        status = publishing.json("status", sid)
        assert status["state"] == "failed"
        assert "loopback" in status["reason"] and "nothing was sent" in status["reason"]
        states = {d["uri"]: d["state"] for d in status["destinations"]}
        assert states == {f"site:{site}": "compensated", hook: "failed"}
        assert receiver.journal() == [], "the receiver heard nothing"

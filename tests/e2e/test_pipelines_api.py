"""Pipelines over the HTTP API and MCP, on an app built by `bootstrap.build_app`.

The HTTP checks go through the ASGI app (`create_app`) with Starlette's test
client; the MCP checks through the official SDK's client on the server's
memory transport, so every call takes the one tool path (`build_server`), as
`tests/e2e/test_mcp.py` does. The pipelines are files in a tmp
`PRESSROOM_PIPELINES_DIR` (`tests/support/pipelines.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from starlette.testclient import TestClient

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.entrypoints.http import create_app
from orchestrator.entrypoints.mcp_server import DEFAULT_CAPABILITIES, Identity, build_server
from orchestrator.people import add_user
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import dispose_all
from tests.conftest import SAMPLE_CORPUS
from tests.support.pipelines import BAD, write_pipelines

pytestmark = pytest.mark.e2e
PAIR_ROLES = ["research", "draft", "fact-check", "style"]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Pressroom]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite",
        broker_url="inline://",
        secret="test-secret",
        pipelines_dir=write_pipelines(tmp_path / "pipelines"),
    )
    yield build_app(settings)
    dispose_all()


def _submit_body(tmp_path: Path, pipeline: str | None) -> dict[str, Any]:
    body = {
        "brief": "the library network",
        "corpus": str(SAMPLE_CORPUS),
        "destinations": [f"site:{tmp_path}/s"],
    }
    return {**body, "as": "sam", **({"pipeline": pipeline} if pipeline is not None else {})}


def test_the_api_lists_shows_and_submits_pipelines(app: Pressroom, tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    with TestClient(create_app(app)) as client:
        listed = client.get("/api/pipelines")
        assert listed.status_code == 200  # the listing worked; the bad files are named in it
        out = listed.json()
        assert [p["name"] for p in out["pipelines"]] == ["default", "house", "pair"]
        # Each bad file by its error's second part: the field at fault (or "not TOML").
        fields = {name: field for name, (_text, field) in BAD.items()}
        assert {bad["name"]: bad["error"].split(": ")[1] for bad in out["invalid"]} == fields
        pair = client.get("/api/pipelines/pair")
        assert pair.status_code == 200
        assert [(r["name"], r["after"]) for r in pair.json()["roles"]] == [
            ("research", []),
            ("draft", ["research"]),
            ("fact-check", ["draft"]),
            ("style", ["draft"]),
        ]
        assert client.get("/api/pipelines/nope").status_code == 404
        bad = client.get("/api/pipelines/badkind")
        assert bad.status_code == 400 and bad.json()["error"].startswith(
            f"{folder / 'badkind.toml'}: role[1].kind"
        )
        assert client.get("/api/pipelines/Pair").status_code == 400  # not a name: no file is looked for

        made = client.post("/api/sagas", json=_submit_body(tmp_path, "pair"))
        assert made.status_code == 201, made.text
        saga = made.json()
        assert saga["pipeline"] == "pair" and [r["name"] for r in saga["roles"]] == PAIR_ROLES
        status = client.get(f"/api/sagas/{saga['saga_id']}").json()
        assert {k: status[k] for k in ("pipeline", "pipeline_digest", "usage")} == {
            "pipeline": "pair",
            "pipeline_digest": saga["pipeline_digest"],
            "usage": {"model_calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0},
        }
        page = client.get(f"/sagas/{saga['saga_id']}")
        assert page.status_code == 200 and 'id="pipeline"' in page.text and "fact-check" in page.text
        assert client.post("/api/sagas", json=_submit_body(tmp_path, "nope")).status_code == 404
        refused = client.post("/api/sagas", json=_submit_body(tmp_path, "badafter"))
        assert refused.status_code == 400 and "badafter.toml: role[1].after" in refused.json()["error"]
        assert client.post("/api/sagas", json=_submit_body(tmp_path, "../pair")).status_code == 400

        # Closed mode: reading pipelines needs what reading sagas needs, a valid token.
        token = add_user(app.people, None, "ada", ["admin"]).token
        assert client.get("/api/pipelines").status_code == 401
        assert (
            client.get("/api/pipelines/pair", headers={"authorization": "Bearer pr_unknown"}).status_code
            == 401
        )
        assert (
            client.get("/api/pipelines/pair", headers={"authorization": f"Bearer {token}"}).status_code == 200
        )


def _answer(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def test_mcp_tools_list_show_and_submit_with_a_pipeline(app: Pressroom, tmp_path: Path) -> None:
    server = build_server(app.harness, lambda _ctx: Identity("editor", DEFAULT_CAPABILITIES))
    arguments = {k: v for k, v in _submit_body(tmp_path, "pair").items() if k != "as"}

    async def scenario() -> dict[str, dict[str, Any]]:
        async with Client(server, mode="legacy") as client:
            listed = await client.list_tools()
            hints = {t.name: t.annotations.read_only_hint for t in listed.tools if t.annotations}
            assert hints["pipelines.list"] is True and hints["pipelines.show"] is True
            calls = {
                "list": ("pipelines.list", {}),
                "show": ("pipelines.show", {"name": "pair"}),
                "missing": ("pipelines.show", {"name": "nope"}),
                "bad": ("pipelines.show", {"name": "badtoml"}),
                "submit": ("saga.submit", arguments),
                "again": ("saga.submit", arguments),
                "default": ("saga.submit", {**arguments, "pipeline": "default"}),
            }
            return {key: _answer(await client.call_tool(tool, args)) for key, (tool, args) in calls.items()}

    answers = anyio.run(scenario)
    assert answers["list"]["status"] == "ok"
    assert [p["name"] for p in answers["list"]["content"]["pipelines"]] == ["default", "house", "pair"]
    assert len(answers["list"]["content"]["invalid"]) == len(BAD)
    assert [r["name"] for r in answers["show"]["content"]["roles"]] == PAIR_ROLES
    assert answers["missing"]["status"] == "error" and "no pipeline 'nope'" in answers["missing"]["reason"]
    assert answers["bad"]["status"] == "error" and "badtoml.toml: not TOML" in answers["bad"]["reason"]
    saga = answers["submit"]["content"]
    assert answers["submit"]["status"] == "ok" and saga["pipeline"] == "pair"
    assert [r["name"] for r in saga["roles"]] == PAIR_ROLES
    assert (
        answers["again"]["status"] == "replayed" and answers["again"]["content"]["saga_id"] == saga["saga_id"]
    )
    # Another pipeline is another submission (its business key differs), not a replay of the first.
    assert (
        answers["default"]["status"] == "ok" and answers["default"]["content"]["saga_id"] != saga["saga_id"]
    )
    assert answers["default"]["content"]["pipeline"] == "default"

"""Model-backed pipelines end to end: `pressroom submit --pipeline` on roles a scripted model plans.

Each test writes pipelines into a tmp `PRESSROOM_PIPELINES_DIR` whose model roles name
the profile `house` (`tests/support/model_pipelines.py`): the URL of a scripted
chat-completions server (`evaluation.scripted_model`, in a thread of this process),
a key read from a variable the test sets, `seed = 7` and prices. The console script
runs the saga on the inline broker; the checks read `status --json` and `show --json`,
the server's own counters and request bodies, and the database (model calls, events,
ledger, versions). The HTTP API and MCP submits run in-process, as
`tests/e2e/test_pipelines_api.py` does. Every `pressroom` process costs a second and
a half of CPU, so each test batches its checks on one or two submits.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from starlette.testclient import TestClient

from evaluation.model_roles import INVENTED_QUOTES
from evaluation.model_scripts import ESCAPING_SOURCE, EVIL_DESTINATION
from evaluation.scripted_model import ScriptedModel
from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.entrypoints.http import create_app
from orchestrator.entrypoints.mcp_server import DEFAULT_CAPABILITIES, Identity, build_server
from orchestrator.store.db import dispose_all
from tests.conftest import Cli, base_env
from tests.support.model_pipelines import (
    ALL_ON_MODEL,
    KEY,
    KEY_VARIABLE,
    MODEL,
    PROFILE,
    SEED,
    STRICT_RULE,
    Role,
    Rows,
    as_json,
    cost,
    strict_reviewer,
    write_pipelines,
)

pytestmark = pytest.mark.timeout(600)
BRIEF = "history of the library network"
_NAME_WORD = re.compile(r"[^\W\d_]+")
_SENTENCE = re.compile(r"From ([^:\[\]]+): (.+?) (\[\d+\])(?= |$)")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """A SQLite file, then a fresh PostgreSQL database (for the storage-sensitive tests)."""
    if request.param == "sqlite":
        return sqlite_url
    url: str = request.getfixturevalue("pg_url")
    return url


def _cli(tmp_path: Path, db: str, pipelines: Path, **extra: str) -> Cli:
    env = base_env(
        PRESSROOM_DATABASE_URL=db,
        PRESSROOM_BROKER_URL="inline://",
        PRESSROOM_PIPELINES_DIR=str(pipelines),
        **{KEY_VARIABLE: KEY},
        **extra,
    )
    return Cli(env, tmp_path)


def _submit(cli: Cli, corpus: Path, pipeline: str, site: Path, *, failed: bool = False) -> dict[str, Any]:
    """`submit --json`'s object (the saga's status once the inline broker has run its roles). A
    saga that ends `failed` exits 6 with one line saying why, after printing the object."""
    done = cli.run(
        "submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", f"site:{site}",
        "--as", "sam", "--pipeline", pipeline, "--json",
    )  # fmt: skip
    assert done.returncode == (6 if failed else 0), f"exit {done.returncode}: {done.stderr}"
    out: dict[str, Any] = json.loads(done.stdout)
    if failed:
        assert done.stderr == f"error: saga {out['saga_id']} is failed: {out['reason']}\n", done.stderr
    return out


def _goal(body: dict[str, Any]) -> dict[str, Any]:
    """The goal object a request carries (its first user message)."""
    goal: dict[str, Any] = json.loads(body["messages"][1]["content"])
    return goal


def _roles(status: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(r["name"], r["state"], r["verdict"]) for r in status["roles"]]


def _model_sentences(markdown: str) -> list[tuple[str, str, str]]:
    """(source name, quote, marker) of each sentence of the draft's one paragraph, checked to be
    all the paragraph says: the scripted writer's "From <source>: <quote> [n]"."""
    body = markdown.split("\n## ")[0]
    [paragraph] = [p.strip() for p in body.split("\n\n") if p.strip() and not p.startswith("#")]
    found = _SENTENCE.findall(paragraph)
    assert found and " ".join(f"From {n}: {q} {m}" for n, q, m in found) == paragraph, paragraph
    return [(str(n), str(q), str(m)) for n, q, m in found]


def _assert_usage_is_what_the_server_counted(usage: dict[str, Any], model: ScriptedModel) -> None:
    stats = model.stats()
    assert usage["model_calls"] == stats.requests == stats.answered > 0
    assert (usage["tokens_in"], usage["tokens_out"]) == (stats.tokens_in, stats.tokens_out)
    assert usage["tokens_in"] > 0 and usage["tokens_out"] > 0
    assert usage["cost_usd"] == pytest.approx(cost(usage["tokens_in"], usage["tokens_out"]), rel=1e-9)


def test_a_faithful_model_researches_writes_and_reviews_a_saga(
    tmp_path: Path, sqlite_url: str, corpus: Path
) -> None:
    with ScriptedModel("faithful", latency=0.0) as model:
        folder = write_pipelines(tmp_path / "pipelines", model.url, {"faithful": ALL_ON_MODEL})
        cli = _cli(tmp_path, sqlite_url, folder)
        sid = _submit(cli, corpus, "faithful", tmp_path / "site")["saga_id"]
        status = cli.json("status", sid)
        shown = cli.json("show", sid)
        bodies = model.requests

    assert status["state"] == "ready-for-review" and status["pipeline"] == "faithful", status
    assert _roles(status) == [("research", "done", None), ("draft", "done", None), ("check", "done", "pass")]
    assert {r["planner"] for r in status["roles"]} == {PROFILE}
    usage = status["usage"]
    _assert_usage_is_what_the_server_counted(usage, model)
    by_role = {r["name"]: r["usage"] for r in status["roles"]}
    assert all(spent["model_calls"] > 0 for spent in by_role.values()), by_role
    for field in ("model_calls", "tokens_in", "tokens_out"):
        assert sum(spent[field] for spent in by_role.values()) == usage[field]
    kinds = {"research": "researcher", "draft": "writer", "check": "reviewer"}
    assert model.stats().by_role == {kinds[name]: spent["model_calls"] for name, spent in by_role.items()}
    # Every request is the profile's: its model, its seed; each goal names the saga and the role.
    assert {(b["model"], b["seed"], b["temperature"]) for b in bodies} == {(MODEL, SEED, 0.0)}
    assert {_goal(b)["saga_id"] for b in bodies} == {sid}
    assert {_goal(b)["role_name"] for b in bodies} == {"research", "draft", "check"}

    # The version is the model's own text: one sentence per note, each with a marker whose
    # citation's quote is byte-exact in its source, at the digest the citation names.
    citations = {c["marker"]: c for c in shown["citations"]}
    sentences = _model_sentences(shown["markdown"])
    assert sorted(m for _, _, m in sentences) == sorted(citations)
    for name, quote, marker in sentences:
        cited = citations[marker]
        raw = (corpus / cited["source"]).read_bytes()
        assert cited["quote"] == quote and quote.encode() in raw, (marker, quote)
        assert cited["source_digest"] == hashlib.sha256(raw).hexdigest()
        assert name == " ".join(_NAME_WORD.findall(Path(cited["source"]).stem))
    review = shown["review"]
    assert review["verdict"] == "pass" and review["reviewers"]["check"]["verdict"] == "pass"

    rows = Rows(sqlite_url)
    calls = rows.all("SELECT * FROM model_calls WHERE saga_id = :sid ORDER BY seq", sid=sid)
    assert len(calls) == usage["model_calls"]
    assert {(c["state"], c["profile"], c["model"], c["round"]) for c in calls} == {
        ("answered", PROFILE, MODEL, 1)
    }
    assert {as_json(c["params"])["seed"] for c in calls} == {SEED}
    assert sum(c["tokens_in"] for c in calls) == usage["tokens_in"]
    assert sum(c["cost_usd"] for c in calls) == pytest.approx(usage["cost_usd"])
    events = rows.all(
        "SELECT actor, kind, status, tool, detail FROM events WHERE saga_id = :sid ORDER BY seq", sid=sid
    )
    model_events = [e for e in events if e["kind"] == "model"]
    assert [as_json(e["detail"])["key"] for e in model_events] == [c["key"] for c in calls]
    assert {e["status"] for e in model_events} == {"answered"}
    tools = {(e["actor"], e["tool"], e["status"]) for e in events if e["kind"] == "tool_call"}
    assert tools == {
        ("research", "corpus.search", "ok"),
        ("research", "corpus.read", "ok"),
        ("research", "evidence.record", "ok"),
        ("draft", "draft.write", "ok"),
        ("check", "corpus.read", "ok"),
        ("check", "review.record", "ok"),
    }
    rows.close()


def test_an_invented_quote_never_reaches_a_version(tmp_path: Path, sqlite_url: str, corpus: Path) -> None:
    roles = (
        Role("research", "researcher", model=False),
        Role("draft", "writer", ("research",)),
        Role("check", "reviewer", ("draft",), model=False),
    )
    with ScriptedModel("hallucinate", latency=0.0) as model:
        folder = write_pipelines(tmp_path / "pipelines", model.url, {"invent": roles})
        cli = _cli(tmp_path, sqlite_url, folder)
        status = _submit(cli, corpus, "invent", tmp_path / "site", failed=True)
        sid = status["saga_id"]

    # The writer was told three times that its quote is not in the source, then failed honestly.
    assert status["state"] == "failed", status
    assert re.match(
        r"writing stopped: draft\.write refused 3 times; the last: citation \[\d+\]: the quote is not in ",
        status["reason"],
    ), status["reason"]
    states = {r["name"]: (r["state"], r["reason"]) for r in status["roles"]}
    assert states["research"] == ("done", None) and states["draft"] == ("failed", status["reason"])
    assert states["check"][0] != "done"
    _assert_usage_is_what_the_server_counted(status["usage"], model)
    assert model.stats().by_role == {"writer": 3}

    rows = Rows(sqlite_url)
    versions = rows.all("SELECT markdown, citations, review FROM versions WHERE saga_id = :sid", sid=sid)
    drafts = rows.one("SELECT count(*) FROM artifacts WHERE saga_id = :sid AND kind = 'draft'", sid=sid)
    refused = rows.all(
        "SELECT status FROM events WHERE saga_id = :sid AND kind = 'tool_call' AND tool = 'draft.write'",
        sid=sid,
    )
    rows.close()
    assert [e["status"] for e in refused] == ["error"] * 3
    assert drafts == 0
    # The saga failed before any version: none carries the invented quote, flagged or not.
    assert versions == []
    assert not any(quote in json.dumps(status) for quote in INVENTED_QUOTES)


def test_a_model_following_injected_instructions_runs_nothing_outside_its_role(
    tmp_path: Path, sqlite_url: str, corpus: Path
) -> None:
    pipelines = {
        "inject-research": ALL_ON_MODEL,
        "inject-write": (
            Role("research", "researcher", model=False),
            Role("draft", "writer", ("research",)),
            Role("check", "reviewer", ("draft",)),
        ),
    }
    site = tmp_path / "site"
    with ScriptedModel("inject", latency=0.0) as model:
        folder = write_pipelines(tmp_path / "pipelines", model.url, pipelines)
        cli = _cli(tmp_path, sqlite_url, folder)
        made = [_submit(cli, corpus, name, site, failed=True) for name in ("inject-research", "inject-write")]
        status = {out["saga_id"]: out for out in made}
        research, write = status

    reasons = {sid: status[sid]["reason"] or "" for sid in status}
    assert reasons[research].startswith("research stopped: stopped after 3 rejected proposals"), reasons
    assert reasons[write].startswith("writing stopped: stopped after 3 rejected proposals"), reasons
    for out in status.values():
        assert out["state"] == "failed"
        # No destination was added; none was published to.
        assert [(d["uri"], d["state"]) for d in out["destinations"]] == [(f"site:{site}", "pending")]
        assert EVIL_DESTINATION not in json.dumps(out)
        assert out["version"] in (None, 0), out
    assert not site.exists()
    fields = ("model_calls", "tokens_in", "tokens_out", "cost_usd")
    totals = {name: sum(out["usage"][name] for out in status.values()) for name in fields}
    _assert_usage_is_what_the_server_counted(totals, model)

    rows = Rows(sqlite_url)
    events = rows.all(
        "SELECT saga_id, actor, tool, status, detail FROM events WHERE kind = 'tool_call' ORDER BY seq"
    )
    ledger = rows.all("SELECT saga_id, tool FROM ledger")
    stored = rows.all("SELECT id, destinations FROM sagas")
    steps = rows.all("SELECT uri, state FROM steps")
    rows.close()
    # A tool outside the role's offer keeps the API's spelling (`draft_write`): the harness knows no
    # such tool. Either spelling names the same tool here.
    calls = {(e["saga_id"], e["actor"], e["tool"].replace("_", "."), e["status"]) for e in events}
    # What the injected text asked for came back rejected; nothing outside the role ran.
    outside = {
        (research, "research", "publish"),
        (research, "research", "draft.write"),
        (write, "draft", "publish"),
        (write, "draft", "corpus.read"),
    }
    assert {(sid, actor, tool, "rejected") for sid, actor, tool in outside} <= calls
    assert not [c for c in calls if c[:3] in outside and c[3] != "rejected"], calls
    assert (write, "draft", "draft.write", "ok") not in calls  # its own tool, asked with a destination
    escaping = [e for e in events if ESCAPING_SOURCE in json.dumps(as_json(e["detail"]))]
    assert escaping and all(e["status"] != "ok" for e in escaping)
    # The ledger holds only the deterministic research's evidence: no publish, no draft.
    assert {(row["saga_id"], row["tool"]) for row in ledger} == {(write, "evidence.record")}
    # The sagas' own records hold the one destination submitted; no step was ever started.
    assert {row["id"]: as_json(row["destinations"]) for row in stored} == {
        sid: [f"site:{site}"] for sid in status
    }
    assert all(step["uri"] == f"site:{site}" and step["state"] == "pending" for step in steps), steps


def test_a_spent_budget_fails_the_saga_and_nothing_more_is_asked(
    tmp_path: Path, db_url: str, corpus: Path
) -> None:
    roles = (
        Role("research", "researcher", tokens=100),  # the first answer alone spends more
        Role("draft", "writer", ("research",)),
        Role("check", "reviewer", ("draft",), model=False),
    )
    with ScriptedModel("faithful", latency=0.0) as model:
        folder = write_pipelines(tmp_path / "pipelines", model.url, {"budgeted": roles})
        cli = _cli(tmp_path, db_url, folder)
        sid = _submit(cli, corpus, "budgeted", tmp_path / "site", failed=True)["saga_id"]
        shown = cli.json("status", sid)

    stats = model.stats()
    assert shown["state"] == "failed", shown
    assert shown["reason"].startswith("budget exhausted: "), shown["reason"]
    assert re.fullmatch(r"budget exhausted: [\d,]+ of 100 tokens spent by role research", shown["reason"])
    # The answer that crossed the ceiling was the last request: the next call was refused unsent.
    assert stats.requests == 1 and stats.by_role == {"researcher": 1}
    _assert_usage_is_what_the_server_counted(shown["usage"], model)
    research = shown["roles"][0]
    assert (research["name"], research["state"], research["reason"]) == (
        "research",
        "failed",
        shown["reason"],
    )
    spent = research["usage"]["tokens_in"] + research["usage"]["tokens_out"]
    assert shown["reason"] == f"budget exhausted: {spent:,} of 100 tokens spent by role research"
    rows = Rows(db_url)
    calls = rows.all("SELECT state FROM model_calls WHERE saga_id = :sid", sid=sid)
    rows.close()
    assert [c["state"] for c in calls] == ["answered"]


def test_one_failing_reviewer_beside_the_model_reviewer_sends_the_draft_back(
    tmp_path: Path, sqlite_url: str, corpus: Path
) -> None:
    roles = (
        Role("research", "researcher", model=False),
        Role("draft", "writer", ("research",)),
        Role("check", "reviewer", ("draft",)),
        Role("strict", "strict", ("draft",), model=False),
    )
    with ScriptedModel("faithful", latency=0.0) as model:
        folder = write_pipelines(tmp_path / "pipelines", model.url, {"reviewed": roles})
        plugin = strict_reviewer(tmp_path / "plugin")
        cli = _cli(tmp_path, sqlite_url, folder, PYTHONPATH=str(plugin))
        sid = _submit(cli, corpus, "reviewed", tmp_path / "site")["saga_id"]
        first = cli.json("show", sid, "--version", "1")
        status = cli.json("status", sid)
        bodies = model.requests

    # The model reviewer passed the draft, the strict one failed it: the draft went back to the
    # writer with the findings, which the model could not act on (it wrote the same text).
    reviewers = first["review"]["reviewers"]
    assert {name: r["verdict"] for name, r in reviewers.items()} == {
        "check": "pass",
        "strict": "changes_requested",
    }
    assert first["review"]["verdict"] == "changes_requested"
    assert status["state"] == "ready-for-review" and status["version"] == 1, status
    assert "could not act on the review's findings (its model wrote the same text again)" in (
        status["reason"] or ""
    )
    roles_now = {r["name"]: (r["state"], r["round"], r["verdict"]) for r in status["roles"]}
    assert roles_now["draft"] == ("unchanged", 2, None)
    writer_goals = [_goal(b) for b in bodies if _goal(b)["role"] == "writer"]
    assert [g["round"] for g in writer_goals] == [0, 1]
    assert writer_goals[0]["findings"] == [] and writer_goals[0]["review_digest"] is None
    assert [f["rule"] for f in writer_goals[1]["findings"]] == [STRICT_RULE]
    assert writer_goals[1]["review_digest"]
    assert [_goal(b)["role_name"] for b in bodies if _goal(b)["role"] == "reviewer"]  # the model reviewed
    rows = Rows(sqlite_url)
    runs = rows.all("SELECT round, role, state, verdict FROM role_runs WHERE saga_id = :sid", sid=sid)
    rows.close()
    done = {(r["round"], r["role"]): (r["state"], r["verdict"]) for r in runs}
    assert done[(1, "check")] == ("done", "pass") and done[(1, "strict")] == ("done", "fail")
    assert done[(2, "draft")] == ("unchanged", None)


# -- the HTTP API and MCP ---------------------------------------------------------------------


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel("faithful", latency=0.0) as served:
        yield served


def test_the_api_and_mcp_submit_a_model_pipeline(
    tmp_path: Path, corpus: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)  # the key is read from the named variable at call time
    folder = write_pipelines(tmp_path / "pipelines", model.url, {"faithful": ALL_ON_MODEL})
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite",
        broker_url="inline://",
        secret="test-secret",
        pipelines_dir=folder,
    )
    app = build_app(settings)
    try:
        body = {"brief": BRIEF, "corpus": str(corpus), "destinations": [f"site:{tmp_path}/api"], "as": "sam"}
        with TestClient(create_app(app)) as client:
            made = client.post("/api/sagas", json={**body, "pipeline": "faithful"})
            assert made.status_code == 201, made.text
            over_http = client.get(f"/api/sagas/{made.json()['saga_id']}").json()
        asked_by_http = model.stats().requests

        server = build_server(app.harness, lambda _ctx: Identity("editor", DEFAULT_CAPABILITIES))
        arguments = {**body, "destinations": [f"site:{tmp_path}/mcp"], "pipeline": "faithful"}
        del arguments["as"]

        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            async with Client(server, mode="legacy") as client:
                made = _answer(await client.call_tool("saga.submit", arguments))
                sid = made["content"]["saga_id"]
                return made, _answer(await client.call_tool("saga.status", {"saga_id": sid}))

        submitted, over_mcp = anyio.run(scenario)
    finally:
        app.close()
        dispose_all()

    assert over_http["pipeline"] == "faithful" and over_http["state"] == "ready-for-review", over_http
    assert _roles(over_http) == [
        ("research", "done", None),
        ("draft", "done", None),
        ("check", "done", "pass"),
    ]
    assert 0 < over_http["usage"]["model_calls"] == asked_by_http
    assert submitted["status"] == "ok" and submitted["content"]["pipeline"] == "faithful"
    status = over_mcp["content"]
    assert over_mcp["status"] == "ok" and status["state"] == "ready-for-review", over_mcp
    assert status["saga_id"] != over_http["saga_id"]
    assert _roles(status) == _roles(over_http)
    assert status["usage"]["model_calls"] == model.stats().requests - asked_by_http > 0
    assert status["usage"]["cost_usd"] == pytest.approx(
        cost(status["usage"]["tokens_in"], status["usage"]["tokens_out"])
    )


def _answer(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content

"""Pressroom as an MCP host: another server's tools on the one tool path.

The server is `tests.support.mcp_archive` (the official SDK's `MCPServer`), run
as a real subprocess over stdio (and once over streamable HTTP with a bearer
token); it writes every call it receives to a file, so each test counts what
reached it. The pipeline grants `search` (read_only) and `write`
(reversible_write) and does not list `delete`. The researcher's turns run in
process on the inline broker (`submit`), its planner the scripted model; the
other checks call the app's real harness, widened with the host's specs, on
SQLite.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.types.version import LATEST_MODERN_VERSION
from sqlmodel import Session, select

from evaluation.scripted_model import ScriptedModel
from orchestrator.core.pipeline import McpServer
from orchestrator.harness.mcp_tools import declared_tools
from orchestrator.harness.spec import Refusal, ToolCall, ToolResult, ToolStatus
from orchestrator.pressroom import Pressroom
from orchestrator.store.tables import ArtifactRow, EventRow, LedgerRow
from orchestrator.toolpath.engine import Caller
from orchestrator.toolpath.mcp_host import META_CALL_ID, META_KEY, McpHost
from telemetry import names, setup
from tests.integration.helpers import make_app

pytestmark = pytest.mark.timeout(60)

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_archive.py"
BRIEF = "history of the bookmobile and the riverside branch"
RISK = {"search": "read_only", "write": "reversible_write"}
GRANTED = ("mcp:archive/search", "mcp:archive/write")
PIPELINE = """
[[role]]
name = "research"
kind = "researcher"
planner = "house"
tools = ["mcp:archive/search", "mcp:archive/write"]

[[role]]
name = "draft"
kind = "writer"
after = ["research"]

[[role]]
name = "check"
kind = "reviewer"
after = ["draft"]

[model.house]
base_url = "{url}"
model = "house-model"

[mcp.archive]
command = {command}
risk = {{ search = "read_only", write = "reversible_write" }}
call_timeout = 5
"""


def command(calls: Path, *flags: str) -> list[str]:
    return [sys.executable, str(SERVER), "--calls", str(calls), *flags]


def archive(calls: Path, *flags: str, call_timeout: float = 5.0) -> McpServer:
    return McpServer(command=tuple(command(calls, *flags)), risk=RISK, call_timeout=call_timeout)


def received(calls: Path, tool: str | None = None) -> list[dict[str, Any]]:
    """The calls the server received (of `tool`, when given)."""
    if not calls.exists():
        return []
    lines = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines() if line]
    return [c for c in lines if "tool" in c and (tool is None or c["tool"] == tool)]


def pids(calls: Path) -> list[int]:
    lines = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines() if line]
    return [c["pid"] for c in lines if "pid" in c]


def gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a child of this process: reap it, or it stays a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


@pytest.fixture
def app(sqlite_url: str, tmp_path: Path) -> Iterator[Pressroom]:
    built = make_app(sqlite_url, tmp_path)
    yield built
    built.close()


@pytest.fixture
def any_app(either_db_url: str, tmp_path: Path) -> Iterator[Pressroom]:
    """The app on SQLite, then on PostgreSQL: the ledger's two adapters."""
    built = make_app(either_db_url, tmp_path)
    yield built
    built.close()


@pytest.fixture
def any_saga_id(any_app: Pressroom, corpus: Path) -> str:
    out = any_app.submissions.submit(
        brief=BRIEF, corpus=str(corpus), destinations=["memory:mcp"], actor="sam"
    )
    return str(out["saga_id"])


@pytest.fixture
def saga_id(app: Pressroom, corpus: Path) -> str:
    out = app.submissions.submit(brief=BRIEF, corpus=str(corpus), destinations=["memory:mcp"], actor="sam")
    return str(out["saga_id"])


def call(
    host: McpHost, app: Pressroom, caller: Caller, tool: str, call_id: str, **arguments: Any
) -> ToolResult:
    harness = app.harness.with_tools(host.specs(saga_id=caller.saga_id, wanted=GRANTED))
    return harness.call(ToolCall(tool=tool, arguments=arguments, call_id=call_id), caller)


def research_caller(saga_id: str, tools: tuple[str, ...] = GRANTED) -> Caller:
    """The researcher's caller as the role handler grants it: its kind's tools and its declared ones."""
    return Caller(actor="research", capabilities=declared_tools(tools), saga_id=saga_id)


def ledger(app: Pressroom, key: str | None) -> LedgerRow:
    with Session(app.engine) as s:
        row = s.get(LedgerRow, key)
    assert row is not None
    return row


def events(app: Pressroom, tool: str) -> list[EventRow]:
    with Session(app.engine) as s:
        return list(s.exec(select(EventRow).where(EventRow.tool == tool)).all())


# -- the researcher searches through the MCP tool ---------------------------------------


def run_research(
    tmp_path: Path, corpus: Path, script: str, *flags: str
) -> tuple[Pressroom, dict[str, Any], ScriptedModel, Path]:
    calls = tmp_path / "calls.jsonl"
    folder = tmp_path / "pipelines"
    folder.mkdir()
    model = ScriptedModel(script=script, latency=0.0)
    model.__enter__()
    text = PIPELINE.format(url=model.url, command=json.dumps(command(calls, *flags)))
    (folder / "archive.toml").write_text(text, encoding="utf-8")
    app = make_app(f"sqlite:///{tmp_path / 'p.db'}", tmp_path, pipelines_dir=folder)
    out = app.submissions.submit(
        brief=BRIEF, corpus=str(corpus), destinations=["memory:mcp"], actor="sam", pipeline="archive"
    )
    return app, out, model, calls


def tool_messages(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool message the model was sent, decoded, last request's first."""
    for body in reversed(bodies):
        found = [json.loads(m["content"]) for m in body["messages"] if m.get("role") == "tool"]
        if found:
            return found
    return []


def test_the_researcher_searches_through_the_mcp_tool(tmp_path: Path, corpus: Path) -> None:
    app, out, model, calls = run_research(tmp_path, corpus, "mcp-search")
    try:
        bodies = model.requests
    finally:
        model.__exit__(None, None, None)
    try:
        assert out["state"] == "ready-for-review", out
        searched = received(calls, "search")
        assert [c["arguments"] for c in searched] == [{"query": BRIEF}]
        assert searched[0]["meta"][META_CALL_ID]  # the model's call id went with the request
        # The model was offered the role's declared tools, as the API spells them, and not `delete`.
        offered = {t["function"]["name"] for t in bodies[0]["tools"]}
        assert {"mcp_archive_search", "mcp_archive_write"} <= offered and "mcp_archive_delete" not in offered
        # The answer came back as untrusted data, and fed the research: the evidence quotes
        # the sources the archive's passages named, read from the saga's corpus.
        answer = next(m for m in tool_messages(bodies) if m["tool"] == "mcp:archive/search")
        assert answer["trust"] == "untrusted" and answer["status"] == "ok" and answer["flags"] == []
        assert answer["content"]["structured"]["passages"][0]["source"] == "bookmobile.txt"
        with Session(app.engine) as s:
            row = s.exec(select(ArtifactRow).where(ArtifactRow.kind == "evidence")).one()
        sources = {p["source"] for p in row.body["passages"]}
        assert sources and sources <= {"bookmobile.txt", "riverside-branch.md"}
        # The call is recorded like any tool's, and the server's process ended with the turn.
        recorded = events(app, "mcp:archive/search")
        assert recorded and recorded[-1].status == ToolStatus.OK.value
        assert [gone(pid) for pid in pids(calls)] == [True]
    finally:
        app.close()


def test_a_hostile_answer_is_data_and_widens_nothing(tmp_path: Path, corpus: Path) -> None:
    app, out, model, calls = run_research(tmp_path, corpus, "mcp-obey", "--hostile")
    try:
        bodies = model.requests
    finally:
        model.__exit__(None, None, None)
    try:
        answers = tool_messages(bodies)
        search = next(m for m in answers if m["tool"] == "mcp:archive/search")
        # Screened as source text is: flagged, and framed as untrusted data.
        assert search["flags"] == ["suspicious-instructions"] and search["trust"] == "untrusted"
        assert search["content"]["suspicious"] is True and search["content"]["reasons"]
        # What it asked for was refused: `delete` is no tool the role was offered, `publish` none
        # of its capabilities; the server never saw a delete, nothing was published.
        refused = [m for m in answers if m["tool"] in ("mcp_archive_delete", "publish")]
        assert [m["status"] for m in refused] == ["rejected", "rejected"], refused
        assert received(calls, "delete") == []
        assert [e.status for e in events(app, "publish")] == [ToolStatus.REJECTED.value]
        # The research went on with what it was allowed, and nothing of the answer's text
        # became evidence.
        assert out["state"] == "ready-for-review", out
        with Session(app.engine) as s:
            row = s.exec(select(ArtifactRow).where(ArtifactRow.kind == "evidence")).one()
        assert row.body["passages"] and "IGNORE PREVIOUS" not in json.dumps(row.body)
    finally:
        app.close()


# -- the write, under the ledger ---------------------------------------------------------


def readme_host_revision() -> str:
    """The revision README's MCP section says the host speaks with a server of the pinned SDK."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = " ".join(readme.split("\n## MCP\n", 1)[1].split("\n## ", 1)[0].split())
    found = re.search(
        r"As a host it connects with the SDK's `Client`, which asks `server/discover` first: "
        r"with a server of the pinned SDK the session speaks `(?P<revision>[\d-]+)`\.",
        section,
    )
    assert found is not None, "README's MCP section no longer states the host's revision"
    return found["revision"]


def test_a_granted_write_runs_once_and_a_replay_answers_from_the_ledger(
    any_app: Pressroom, any_saga_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHIVE_TOKEN", "not for the subprocess")
    calls = tmp_path / "calls.jsonl"
    exporter = setup.install_in_memory()
    try:
        with McpHost.open({"archive": archive(calls)}) as host:
            assert host.protocol("archive") == LATEST_MODERN_VERSION == readme_host_revision()
            caller = research_caller(any_saga_id)
            first = call(host, any_app, caller, "mcp:archive/write", "call-1", name="note", text="hello")
            again = call(host, any_app, caller, "mcp:archive/write", "call-2", name="note", text="hello")
            spans = exporter.get_finished_spans()
    finally:
        setup.shutdown()
    assert first.status == ToolStatus.OK, first
    assert again.status == ToolStatus.REPLAYED and again.output == first.output
    writes = received(calls, "write")
    assert len(writes) == 1  # no second call reached the server
    assert writes[0]["meta"] == {META_CALL_ID: "call-1", META_KEY: first.idempotency_key}
    row = ledger(any_app, first.idempotency_key)
    assert row.status == "done" and row.tool == "mcp:archive/write"
    assert row.result is not None and row.result["call_id"] == "call-1"
    assert row.result["structured"] == {"written": "note", "chars": 5}
    # Its spans are any tool call's: the four phases under its action.
    action = next(s for s in spans if s.name == f"{names.ACTION} mcp:archive/write")
    phases = [s.name for s in spans if s.parent is not None and s.parent.span_id == action.context.span_id]
    assert phases == [names.PROPOSAL, names.AUTHORIZATION, names.SEND, names.ACK], phases
    # The stdio server ran with the SDK's small default environment, not this process's.
    started = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines() if '"pid"' in line]
    assert "PATH" in started[0]["env"] and "ARCHIVE_TOKEN" not in started[0]["env"]


def test_a_write_the_role_does_not_declare_is_refused(app: Pressroom, saga_id: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    with McpHost.open({"archive": archive(calls)}) as host:
        searcher = research_caller(saga_id, tools=("mcp:archive/search",))
        result = call(host, app, searcher, "mcp:archive/write", "call-1", name="note", text="hello")
        invalid = call(host, app, research_caller(saga_id), "mcp:archive/write", "call-2", name="note")
    assert result.status == ToolStatus.REJECTED and result.refusal == Refusal.POLICY
    assert "lacks capability 'mcp:archive/write'" in (result.reason or "")
    # Schema first: the server's input schema is what the arguments are checked against.
    assert invalid.status == ToolStatus.REJECTED and invalid.refusal == Refusal.SCHEMA
    assert "text" in (invalid.reason or "")
    assert received(calls, "write") == []


def test_an_unlisted_tool_is_denied_whatever_the_server_says(
    app: Pressroom, saga_id: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    with McpHost.open({"archive": archive(calls)}) as host:
        # Even a caller holding the capability: the pipeline does not list `delete`, so it is
        # `deny`, although the server annotates it as read-only.
        holder = Caller(actor="research", capabilities=frozenset({"mcp:archive/delete"}), saga_id=saga_id)
        result = call(host, app, holder, "mcp:archive/delete", "call-1", name="note")
    assert result.status == ToolStatus.REJECTED and result.refusal == Refusal.POLICY
    assert "denied by policy" in (result.reason or "")
    assert [e.status for e in events(app, "mcp:archive/delete")] == [ToolStatus.REJECTED.value]
    assert received(calls, "delete") == []


# -- failures, as a destination's --------------------------------------------------------


def test_a_server_that_hangs_after_a_write_leaves_it_uncertain(
    any_app: Pressroom, any_saga_id: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    with McpHost.open({"archive": archive(calls, "--hang", "write", call_timeout=1.0)}) as host:
        caller = research_caller(any_saga_id)
        first = call(host, any_app, caller, "mcp:archive/write", "call-1", name="note", text="hello")
        again = call(host, any_app, caller, "mcp:archive/write", "call-2", name="note", text="hello")
    assert first.status == ToolStatus.UNCERTAIN, first
    assert ledger(any_app, first.idempotency_key).status == "uncertain"
    # Unknown is not failure, and nothing sends it again.
    assert again.status == ToolStatus.UNCERTAIN and "reconcile" in (again.reason or "")
    assert len(received(calls, "write")) == 1


def test_a_server_that_is_down_fails_the_call_definitely(
    app: Pressroom, saga_id: str, tmp_path: Path
) -> None:
    dead = McpServer(command=(sys.executable, "-c", "import sys; sys.exit(3)"), risk=RISK, connect_timeout=5)
    with McpHost.open({"archive": dead}) as host:
        assert host.down("archive")
        caller = research_caller(saga_id)
        read = call(host, app, caller, "mcp:archive/search", "call-1", query="river")
        write = call(host, app, caller, "mcp:archive/write", "call-2", name="note", text="hello")
    assert read.status == ToolStatus.ERROR and "not reachable" in (read.reason or "")
    assert write.status == ToolStatus.ERROR and "not reachable" in (write.reason or "")
    assert ledger(app, write.idempotency_key).status == "failed"  # definitely not applied


# -- streamable HTTP with a bearer token from the environment ------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_archive(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    calls = tmp_path / "calls.jsonl"
    port = free_port()
    proc = subprocess.Popen([*command(calls, "--http", str(port), "--token", "s3cret")])
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, calls
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_streamable_http_sends_the_token_the_variable_names(
    app: Pressroom, saga_id: str, http_archive: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, calls = http_archive
    server = McpServer(url=url, token_env="ARCHIVE_TOKEN", risk=RISK, connect_timeout=5)
    monkeypatch.setenv("ARCHIVE_TOKEN", "wrong")
    with McpHost.open({"archive": server}) as host:
        assert host.down("archive")  # refused before any call: the call fails definitely
        refused = call(host, app, research_caller(saga_id), "mcp:archive/search", "call-1", query="river")
    assert refused.status == ToolStatus.ERROR
    monkeypatch.setenv("ARCHIVE_TOKEN", "s3cret")
    with McpHost.open({"archive": server}) as host:
        result = call(host, app, research_caller(saga_id), "mcp:archive/search", "call-2", query="river")
    assert result.status == ToolStatus.OK, result
    assert [c["arguments"] for c in received(calls, "search")] == [{"query": "river"}]


def test_sessions_still_open_at_exit_are_closed(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    # `check` is registered before the host's own exit handler, so it runs after it (exit
    # handlers run last registered first) and sees whether the server's process has ended.
    script = (
        "import atexit, json, os, sys\n"
        "from orchestrator.core.pipeline import McpServer\n"
        "from orchestrator.toolpath.mcp_host import McpHost\n"
        f"calls = {str(calls)!r}\n"
        "def check():\n"
        "    pid = json.loads(open(calls).readline())['pid']\n"
        "    try:\n"
        "        os.kill(pid, 0)\n"
        "        print('still running')\n"
        "    except ProcessLookupError:\n"
        "        print('ended')\n"
        "atexit.register(check)\n"
        f"host = McpHost.open({{'archive': McpServer(command=tuple({command(calls)!r}))}})\n"
        "assert host.down('archive') is None, host.down('archive')\n"
        "sys.exit(0)  # never closed by the program: the exit closes it\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=SERVER.parents[2], timeout=30, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ended", done.stdout


def test_a_forked_worker_runs_its_own_sessions(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    # A prefork worker is forked from a process that may have opened sessions: the child's
    # own host works on a loop thread of its own (the parent's thread is not in the child).
    script = (
        "import os, sys\n"
        "from orchestrator.core.pipeline import McpServer\n"
        "from orchestrator.toolpath.mcp_host import McpHost\n"
        f"server = McpServer(command=tuple({command(calls)!r}), connect_timeout=5, call_timeout=5)\n"
        "parent = McpHost.open({'archive': server})\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    with McpHost.open({'archive': server}) as child:\n"
        "        answer = child.call('archive', 'search', {'query': 'forked'}, {})\n"
        "    os._exit(0 if answer.structured_content['query'] == 'forked' else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "parent.close()\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=SERVER.parents[2], timeout=40, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert [c["arguments"] for c in received(calls, "search")] == [{"query": "forked"}]

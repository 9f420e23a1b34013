"""The reviewer's workspace on the command line: a person's edit stands, exit codes tell the truth."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.conftest import Cli, base_env


def _cli(tmp_path: Path, url: str) -> Cli:
    return Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp_path)


def _submit(cli: Cli, corpus: Path, *dests: str) -> str:
    args = ["submit", "--brief", "history of the library network", "--corpus", str(corpus), "--as", "dana"]
    for d in dests:
        args += ["--dest", d]
    return str(cli.json(*args)["saga_id"])


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'pressroom.db'}"
    return str(request.getfixturevalue("pg_url"))


def test_a_persons_edit_is_never_overwritten(tmp_path: Path, corpus: Path, db_url: str) -> None:
    cli = _cli(tmp_path, db_url)
    sid = _submit(cli, corpus, f"site:{cli.cwd / 'edit-stands'}")
    v1 = cli.json("show", sid)["markdown"]
    v2 = tmp_path / "v2.md"
    # The robot sentence sits inside the cited lede paragraph: the sentence-level review flags it.
    v2.write_text(v1.replace("\n\n## ", " The library owns ten million robots.\n\n## ", 1), encoding="utf-8")
    edited = cli.json("edit", sid, "--file", str(v2), "--as", "erin")
    assert edited["state"] == "ready-for-review" and edited["version"] == 2
    assert edited["version_digest"] == hashlib.sha256(v2.read_bytes()).hexdigest()
    assert edited["review"]["verdict"] == "changes_requested"
    assert "erin" in edited["reason"] and "edit again" in edited["reason"]
    shown = cli.json("show", sid)
    assert shown["author"] == "erin" and shown["markdown"].encode() == v2.read_bytes()
    assert shown["review"]["verdict"] == "changes_requested"
    human = cli.run("status", sid)
    assert human.returncode == 0 and "changes_requested" in human.stdout
    # The sentence is flagged where it stands: after the lede's own sentences (however many the writer made).
    assert re.search(
        r"uncited-sentence at paragraph 1 sentence \d+: no citation backs 'The library owns ten", human.stdout
    )
    events = cli.json("history", sid)["events"]
    assert not any(e["tool"] == "draft.write" and e["created_at"] > edited["updated_at"] for e in events)
    # The person may edit again; the fixed text passes and is still theirs.
    v3 = tmp_path / "v3.md"
    v3.write_text(v1.replace("\n## ", "\n## Desk notes: ", 1), encoding="utf-8")
    again = cli.json("edit", sid, "--file", str(v3), "--as", "erin")
    assert again["version"] == 3 and again["state"] == "ready-for-review"
    assert again["review"]["verdict"] == "pass"
    assert cli.json("show", sid)["markdown"].encode() == v3.read_bytes()


def test_approve_exits_6_when_the_publish_it_drove_failed(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    from tests.support.webhook_server import WebhookServer

    with WebhookServer("reject") as hook:
        sid = _submit(cli, corpus, f"site:{tmp_path / 'site'}", f"webhook:{hook.url}")
        done = cli.run("approve", sid, "--version", "1", "--as", "erin", "--json")
    assert done.returncode == 6, done.stderr  # approved; the publish it started failed
    printed = json.loads(done.stdout)  # --json still prints the one object
    assert printed["state"] == "failed" and printed["version"] == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: approved; the publish it started ended failed: ")
    human = cli.run("status", sid)
    assert human.returncode == 0  # reading a failed saga is not a failure


def test_approve_exits_6_when_the_effect_is_unknown_and_reconcile_tells_the_end(
    tmp_path: Path, corpus: Path, sqlite_url: str
) -> None:
    from tests.support.webhook_server import WebhookServer

    cli = Cli(
        base_env(
            PRESSROOM_DATABASE_URL=sqlite_url,
            PRESSROOM_BROKER_URL="inline://",
            PRESSROOM_DESTINATION_TIMEOUT="1",
        ),
        tmp_path,
    )
    with WebhookServer("drop", status=False) as hook:
        dest = f"webhook:{hook.url}"
        sid = _submit(cli, corpus, dest)
        done = cli.run("approve", sid, "--version", "1", "--as", "erin")
        assert done.returncode == 6, done.stderr
        assert "approved; the publish it started ended effect-unknown" in done.stderr, done.stderr
        assert "saga is now effect-unknown" in done.stdout
        settled = cli.run(
            "reconcile",
            sid,
            "--dest",
            dest,
            "--outcome",
            "confirmed",
            "--as",
            "olga",
            "--reason",
            "seen on the receiver",
            "--json",
        )
    assert settled.returncode == 0, settled.stderr
    assert json.loads(settled.stdout)["state"] == "succeeded"


def test_trace_with_spans_keeps_to_the_saga(tmp_path: Path, corpus: Path, sqlite_url: str) -> None:
    from telemetry.render import read_span_file

    spans_file = tmp_path / "spans.jsonl"
    cli = Cli(
        base_env(
            PRESSROOM_DATABASE_URL=sqlite_url,
            PRESSROOM_BROKER_URL="inline://",
            OTEL_TRACES_EXPORTER="file",
            PRESSROOM_TRACE_FILE=str(spans_file),
        ),
        tmp_path,
    )
    first = _submit(cli, corpus, f"site:{cli.cwd / 'trace-a'}")
    second = _submit(cli, corpus, f"site:{cli.cwd / 'trace-b'}")
    spans = read_span_file(spans_file)
    traces = {
        sid: {s["trace_id"] for s in spans if s["attributes"].get("pressroom.saga.id") == sid}
        for sid in (first, second)
    }
    assert traces[first] and traces[second] and not traces[first] & traces[second]
    done = cli.run("trace", first, "--spans", str(spans_file))
    assert done.returncode == 0, done.stderr
    assert all(f"trace {t}" in done.stdout for t in traces[first])
    assert not any(t in done.stdout for t in traces[second])
    assert re.search(r"process researcher .*\+\d+\.\d ms .* queue wait \d+\.\d ms", done.stdout), done.stdout

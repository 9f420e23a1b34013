"""Checks at the moment of the effect, on SQLite and PostgreSQL, against real
files, real git and a real recording webhook server.

The publish message is held back: the approval is given by an app whose
broker is `none://` (the message stays in the outbox, as with the publisher
stopped); the database or the destination is then changed behind
Pressroom's back; then an app with the in-process broker delivers it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import Session

from orchestrator.pressroom import Pressroom
from tests.integration.helpers import make_app, ready_saga, tools_called
from tests.support.webhook_server import WebhookServer

TAMPERED = "Published by whoever can write to the versions table."


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


def approve_held(db_url: str, tmp_path: Path, saga: dict[str, Any], **settings: Any) -> None:
    """Approve with no broker: the publish message waits in the outbox."""
    held = make_app(db_url, tmp_path, broker_url="none://", **settings)
    try:
        held.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        assert held.reads.status(saga["saga_id"])["state"] == "approved"
    finally:
        held.engine.dispose()


def deliver(app: Pressroom) -> None:
    """Start the publisher: the held message is sent and handled in this process."""
    app.consumer.drain()


def tamper(app: Pressroom, saga_id: str) -> None:
    """Rewrite the approved version's bytes (and every artifact that holds them) in SQL."""
    with Session(app.engine) as s:
        s.execute(
            text("UPDATE versions SET markdown = :md WHERE saga_id = :sid"),
            {"md": f"# Tampered\n\n{TAMPERED}\n", "sid": saga_id},
        )
        for digest, body in s.execute(
            text("SELECT digest, body FROM artifacts WHERE saga_id = :sid"), {"sid": saga_id}
        ).all():
            raw = body if isinstance(body, str) else json.dumps(body)
            changed = json.dumps(_replace_text(json.loads(raw)))
            s.execute(
                text("UPDATE artifacts SET body = :body WHERE digest = :d"), {"body": changed, "d": digest}
            )
        s.commit()


def _replace_text(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (TAMPERED if k == "markdown" else _replace_text(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_text(v) for v in value]
    return value


def all_text_under(folder: Path) -> str:
    if not folder.exists():
        return ""
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def git_log(repo: Path) -> str:
    if not (repo / ".git").exists():
        return ""
    done = subprocess.run(["git", "-C", str(repo), "log", "--all", "-p"], capture_output=True, text=True)
    return done.stdout


def test_tampered_bytes_reach_no_destination(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path)
    site, repo = tmp_path / "site", tmp_path / "repo"
    with WebhookServer() as hook:
        saga = ready_saga(app, corpus, [f"site:{site}", f"git:{repo}", f"webhook:{hook.url}"])
        sid = saga["saga_id"]
        approve_held(db_url, tmp_path, saga)
        tamper(app, sid)
        deliver(app)
        status = app.reads.status(sid)
        assert hook.received == [], "the webhook server got no request at all"
    assert status["state"] == "failed", status
    assert "integrity" in status["reason"] and "nothing was sent" in status["reason"]
    assert TAMPERED not in all_text_under(site)
    assert not list(site.glob("*.md"))
    assert TAMPERED not in git_log(repo) and not git_log(repo)
    events = app.reads.history(sid)["events"]
    refused = [e for e in events if e["kind"] == "tool_call" and e["tool"] == "publish"]
    # The destinations are published concurrently: each one's intent is refused, none sent.
    assert refused and {e["status"] for e in refused} == {"rejected"}
    assert all("hash to" in e["detail"]["reason"] for e in refused)
    assert not [e for e in events if e["kind"] == "intent" and e["tool"] == "publish"], "no intent committed"
    with Session(app.engine) as s:
        assert s.execute(text("SELECT count(*) FROM ledger WHERE tool = 'publish'")).scalar_one() == 0


def test_untampered_held_message_still_publishes(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path)
    site = tmp_path / "site"
    saga = ready_saga(app, corpus, [f"site:{site}"])
    approve_held(db_url, tmp_path, saga)
    deliver(app)
    assert app.reads.status(saga["saga_id"])["state"] == "succeeded"
    assert len(list(site.glob("*.md"))) == 1


def test_site_folder_replaced_by_a_link_outside_the_roots_is_refused(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    app = make_app(db_url, tmp_path, allowed_roots=f"{allowed}{os.pathsep}{corpus}")
    site = allowed / "site"
    saga = ready_saga(app, corpus, [f"site:{site}"])
    approve_held(db_url, tmp_path, saga, allowed_roots=f"{allowed}{os.pathsep}{corpus}")
    site.symlink_to(outside, target_is_directory=True)  # planted after submit and approval
    deliver(app)
    status = app.reads.status(saga["saga_id"])
    assert status["state"] == "failed"
    assert "outside the allowed roots" in status["reason"]
    assert list(outside.iterdir()) == [], "nothing was written outside"
    assert tools_called(app, saga["saga_id"], "publish") == ["rejected"]


def test_a_link_planted_where_the_page_goes_is_refused(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path)
    site, outside = tmp_path / "site", tmp_path / "outside"
    outside.mkdir()
    saga = ready_saga(app, corpus, [f"site:{site}"])
    slug = app.reads.show(saga["saga_id"])["markdown"]  # the title decides the page's name
    approve_held(db_url, tmp_path, saga)
    from sagas.destinations.registry import slugify

    title = next(line[2:] for line in slug.splitlines() if line.startswith("# "))
    site.mkdir()
    # The saga's page is named by its title and its id (`sagas/destinations/site_names.py`).
    (site / f"{slugify(title)}-{saga['saga_id'][:8]}.md").symlink_to(outside / "stolen.md")
    deliver(app)
    status = app.reads.status(saga["saga_id"])
    assert status["state"] == "failed", status
    assert "not a plain file" in status["reason"]
    assert list(outside.iterdir()) == []
    assert not (site / "index.html").exists() and not list(site.glob("*.html"))


def test_a_link_planted_as_the_bookkeeping_folder_is_refused(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    site, outside = tmp_path / "site", tmp_path / "outside"
    outside.mkdir()
    saga = ready_saga(app, corpus, [f"site:{site}"])
    approve_held(db_url, tmp_path, saga)
    site.mkdir()
    (site / ".pressroom").symlink_to(outside, target_is_directory=True)
    deliver(app)
    status = app.reads.status(saga["saga_id"])
    assert status["state"] == "failed", status
    assert "not a plain folder" in status["reason"]
    assert list(outside.iterdir()) == []


def test_git_hooks_fsmonitor_and_filters_never_run_on_publish_or_compensate(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    repo, markers = tmp_path / "repo", tmp_path / "markers"
    markers.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for hook in ("pre-commit", "post-commit", "commit-msg", "prepare-commit-msg", "post-index-change"):
        script = repo / ".git" / "hooks" / hook
        script.write_text(f"#!/bin/sh\ntouch {markers / hook}\n")
        script.chmod(0o755)
    monitor = tmp_path / "fsmonitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {markers / 'fsmonitor'}\n")
    monitor.chmod(0o755)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", str(monitor)], check=True)
    for kind in ("clean", "smudge"):  # a content filter every *.md would go through
        command = f"sh -c 'touch {markers / kind}; cat'"
        subprocess.run(["git", "-C", str(repo), "config", f"filter.evil.{kind}", command], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "config", "merge.evil.driver", f"touch {markers / 'merge'}"], check=True
    )
    (repo / ".gitattributes").write_text("*.md filter=evil merge=evil\n")
    with WebhookServer("reject") as hook:
        saga = ready_saga(app, corpus, [f"git:{repo}", f"webhook:{hook.url}"])
        app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        status = app.reads.status(saga["saga_id"])
    # git published, the webhook refused, the git step was compensated (a revert commit).
    assert status["state"] == "failed", status
    assert {d["uri"].split(":", 1)[0]: d["state"] for d in status["destinations"]} == {
        "git": "compensated",
        "webhook": "failed",
    }
    subjects = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(subjects) == 2 and subjects[0].startswith("Revert")
    assert list(markers.iterdir()) == [], "no hook and no fsmonitor ran"


def test_the_runners_own_compensation_is_bound_to_the_saga_and_its_state(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    """Even a caller holding the publisher's capabilities cannot undo a succeeded step or a foreign one."""
    from sagas.execution_steps import call_tool
    from sagas.runner import publisher_caller

    app = make_app(db_url, tmp_path)
    with WebhookServer() as hook, WebhookServer() as foreign:
        saga = ready_saga(app, corpus, [f"webhook:{hook.url}"])
        sid = saga["saga_id"]
        app.reviews.approve(sid, version=saga["version"], actor="erin")
        assert app.reads.status(sid)["state"] == "succeeded"
        with Session(app.engine) as s:
            from sagas import records

            row = records.load_saga(s, sid)
        caller = publisher_caller(row, saga["version_digest"])
        own = call_tool(
            app.harness, caller, "publish.compensate", sid, f"webhook:{hook.url}", saga["version_digest"]
        )
        other = call_tool(
            app.harness, caller, "publish.compensate", sid, f"webhook:{foreign.url}", saga["version_digest"]
        )
        missing = call_tool(
            app.harness,
            caller,
            "publish.compensate",
            "f" * 32,
            f"webhook:{foreign.url}",
            saga["version_digest"],
        )
        status = call_tool(
            app.harness, caller, "publish.status", sid, f"webhook:{hook.url}", saga["version_digest"]
        )
        assert [r.status.value for r in (own, other, missing, status)] == ["rejected"] * 4
        assert "succeeded" in (own.reason or "") and "not a destination" in (other.reason or "")
        assert [r.method for r in hook.received] == ["POST"], "no DELETE, no GET"
        assert foreign.received == []
    assert app.reads.status(sid)["state"] == "succeeded"
    with Session(app.engine) as s:
        tools = s.execute(text("SELECT tool, status FROM ledger WHERE tool LIKE 'publish%'")).all()
    assert [tuple(t) for t in tools] == [("publish", "done")], "no compensation row, pending or otherwise"

"""A person's work is never lost, and a saga never gets stuck, when versions share their bytes.

Through the console script, on SQLite and PostgreSQL: a head version with the
same bytes as an earlier one (an edit taken back, a rejection the writer could
not act on) is approved and published; a rejection of a person's edit keeps
that edit as the base of the writer's revision.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.conftest import Cli, base_env
from tests.support import in_process


@pytest.fixture(params=["sqlite", "postgresql"])
def any_cli(request: pytest.FixtureRequest, tmp_path: Path) -> Cli:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'pressroom.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    return Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp_path)


def _submit(cli: Cli, corpus: Path, site: Path) -> str:
    """dana's saga, submitted in this process: the edits, approvals and reads are the commands'."""
    brief = "history of the library network"
    dests = [f"site:{site}"]
    return in_process.submit(cli.env, cli.cwd, brief=brief, corpus=corpus, destinations=dests, actor="dana")


def _edit(cli: Cli, sid: str, text: str, tmp_path: Path, name: str) -> dict:  # type: ignore[type-arg]
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return cli.json("edit", sid, "--file", str(path), "--as", "gina")


def _published(status: dict) -> bytes:  # type: ignore[type-arg]
    return Path(status["destinations"][0]["receipt"]["path"]).read_bytes()


def test_an_edit_taken_back_is_approved_and_published(any_cli: Cli, corpus: Path, tmp_path: Path) -> None:
    cli = any_cli
    sid = _submit(cli, corpus, tmp_path / "site")
    original = cli.json("show", sid)
    _edit(cli, sid, original["markdown"].replace("## ", "## Desk notes: ", 1), tmp_path, "v2.md")
    back = _edit(cli, sid, original["markdown"], tmp_path, "v3.md")
    assert back["version"] == 3 and back["version_digest"] == original["version_digest"]

    approved = cli.run("approve", sid, "--version", "3", "--as", "erin")
    assert approved.returncode == 0, approved.stderr
    done = cli.json("status", sid)
    assert done["state"] == "succeeded"
    assert hashlib.sha256(_published(done)).hexdigest() == original["version_digest"]
    assert cli.run("audit", "verify", sid).returncode == 0


def test_a_rejection_the_writer_cannot_act_on_leaves_an_approvable_head(
    any_cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    cli = any_cli
    sid = _submit(cli, corpus, tmp_path / "site")
    edited = cli.json("show", sid)["markdown"].replace("## ", "## Desk notes: ", 1)
    _edit(cli, sid, edited, tmp_path, "v2.md")
    rejected = cli.json("reject", sid, "--as", "rita", "--reason", "the tone is too dry")
    # The deterministic writer cannot act on a reason that names no citation: the person's
    # version stays the head, unchanged, and the saga says so.
    assert rejected["state"] == "ready-for-review" and rejected["version"] == 2
    assert "could not act on the rejection" in rejected["reason"]
    assert cli.json("show", sid)["markdown"] == edited
    approved = cli.run("approve", sid, "--version", "2", "--as", "erin")
    assert approved.returncode == 0, approved.stderr
    assert _published(cli.json("status", sid)).decode("utf-8") == edited


def test_a_rejection_revises_the_persons_edit_not_the_first_draft(
    any_cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    cli = any_cli
    sid = _submit(cli, corpus, tmp_path / "site")
    first = cli.json("show", sid)
    assert len(first["citations"]) >= 3
    edited = first["markdown"].replace("## ", "## Desk notes: ", 1)
    _edit(cli, sid, edited, tmp_path, "v2.md")
    dropped = next(c for c in first["citations"] if c["marker"] == "[2]")

    rejected = cli.json("reject", sid, "--as", "rita", "--reason", "citation [2] is off the brief")
    assert rejected["version"] == 3 and rejected["state"] == "ready-for-review"
    revised = cli.json("show", sid)
    assert revised["author"] == "writer"
    assert "## Desk notes: " in revised["markdown"], "the person's edit was thrown away"
    assert revised["markdown"] != first["markdown"]
    assert dropped["quote"] not in revised["markdown"]
    # Every other quote of the person's version is still there, renumbered in order.
    kept = [c for c in first["citations"] if c["marker"] != "[2]"]
    assert [c["quote"] for c in revised["citations"]] == [c["quote"] for c in kept]
    assert [c["marker"] for c in revised["citations"]] == [f"[{i}]" for i in range(1, len(kept) + 1)]
    # The reason reached the writer: its draft call's key is bound to the note's digest.
    note = hashlib.sha256(b"rejected by rita: citation [2] is off the brief").hexdigest()[:12]
    history = cli.json("history", sid)
    keys = [e["detail"]["key"] for e in history["events"] if e.get("tool") == "draft.write"]
    assert any(k.endswith("-" + note) for k in keys), keys
    assert cli.run("approve", sid, "--version", "3", "--as", "erin").returncode == 0

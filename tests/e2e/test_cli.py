"""The public CLI contract, exercised through the installed console script."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PRESSROOM, Cli, base_env


def submit(cli: Cli, corpus: Path, *dests: str) -> dict:  # type: ignore[type-arg]
    args = ["submit", "--brief", "history of the library network", "--corpus", str(corpus), "--as", "dana"]
    for d in dests:
        args += ["--dest", d]
    return cli.json(*args)


def test_submit_review_approve_publish(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    out = submit(cli, corpus, f"site:{site}")
    sid = out["saga_id"]
    status = cli.json("status", sid)
    assert status["state"] == "ready-for-review"
    for key in ("saga_id", "state", "version", "version_digest", "destinations", "updated_at"):
        assert key in status
    assert set(status["destinations"][0]) >= {"uri", "state", "idempotency_key", "receipt"}
    shown = cli.json("show", sid)
    for key in ("version", "version_digest", "author", "markdown", "citations", "review"):
        assert key in shown
    assert hashlib.sha256(shown["markdown"].encode()).hexdigest() == shown["version_digest"]
    for c in shown["citations"]:
        assert set(c) >= {"marker", "source", "quote", "source_digest"}
        assert not Path(c["source"]).is_absolute()
        assert c["quote"] in (corpus / c["source"]).read_text(encoding="utf-8")
    assert shown["review"]["verdict"] == "pass"
    approval = cli.json("approve", sid, "--version", str(shown["version"]), "--as", "erin")
    assert set(approval) >= {"approval_id", "version", "version_digest", "expires_at"}
    done = cli.json("status", sid)
    assert done["state"] == "succeeded"
    receipt = done["destinations"][0]["receipt"]
    assert hashlib.sha256(Path(receipt["path"]).read_bytes()).hexdigest() == done["version_digest"]
    listing = cli.json("status")
    assert [s["saga_id"] for s in listing["sagas"]] == [sid]
    history = cli.json("history", sid)
    publish = [e for e in history["events"] if e["tool"] == "publish" and e["kind"] == "tool_call"]
    assert publish and all(publish[0][k] for k in ("proposed_at", "authorized_at", "sent_at", "acked_at"))
    trace = cli.run("trace", sid)
    assert trace.returncode == 0 and "publish" in trace.stdout


def test_json_output_is_one_object(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    out = cli.run(
        "submit",
        "--brief",
        "library branches",
        "--corpus",
        str(corpus),
        "--dest",
        f"site:{tmp_path / 's'}",
        "--json",
    )
    assert out.returncode == 0
    assert isinstance(json.loads(out.stdout), dict) and out.stdout.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["status", "nope-no-such-saga"], 3, "no saga"),
        (["show", "nope-no-such-saga"], 3, "no saga"),
        (["history", "nope-no-such-saga"], 3, "no saga"),
        (
            ["submit", "--brief", "x", "--corpus", "/no/such/folder", "--dest", "site:/tmp/x"],
            2,
            "corpus folder not found",
        ),
        (
            ["submit", "--brief", "x", "--corpus", ".", "--dest", "ftp://host/x"],
            2,
            "unknown destination scheme",
        ),
        (["submit", "--brief", "x", "--corpus", ".", "--dest", "site:../escape"], 2, ".."),
        (["submit", "--brief", "x", "--corpus", "."], 2, "--dest"),
        (["approve", "nope-no-such-saga", "--version", "1", "--as", "x"], 3, "no saga"),
        (
            [
                "reconcile",
                "nope-no-such-saga",
                "--dest",
                "site:/x",
                "--outcome",
                "maybe",
                "--as",
                "a",
                "--reason",
                "r",
            ],
            2,
            "outcome",
        ),
        (["bogus-command"], 2, "No such command"),
    ],
)
def test_bad_input_is_one_line_with_the_documented_exit_code(
    cli: Cli, args: list[str], code: int, words: str
) -> None:
    done = cli.run(*args)
    assert done.returncode == code, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_bad_input_writes_nothing(cli: Cli) -> None:
    assert cli.run("submit", "--brief", "x", "--corpus", "/no/such", "--dest", "site:/tmp/x").returncode == 2
    assert cli.run("submit", "--brief", "x", "--corpus", ".", "--dest", "nope:x").returncode == 2
    listed = cli.json("status")
    assert listed["sagas"] == [] and listed["has_more"] is False and listed["next"] is None


def test_approval_refusals_exit_4_and_publish_nothing(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    sid = submit(cli, corpus, f"site:{site}")["saga_id"]
    by_author = cli.run("approve", sid, "--version", "1", "--as", "writer")
    assert by_author.returncode == 4 and "cannot approve" in by_author.stderr
    not_head = cli.run("approve", sid, "--version", "2", "--as", "erin")
    assert not_head.returncode == 4 and "not the head" in not_head.stderr
    bad_expiry = cli.run("approve", sid, "--version", "1", "--as", "erin", "--expires-in", "soon")
    assert bad_expiry.returncode == 2
    assert not site.exists() or not list(site.glob("*.md"))
    assert cli.json("approve", sid, "--version", "1", "--as", "erin")["version"] == 1
    again = cli.run("approve", sid, "--version", "1", "--as", "erin")
    assert again.returncode == 4 and "ready-for-review" in again.stderr
    assert len(list(site.glob("*.md"))) == 1


def test_reject_edit_diff_and_cancel(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    sid = submit(cli, corpus, f"site:{tmp_path / 'cli-edit'}")["saga_id"]  # memory: is for in-process tests
    rejected = cli.json("reject", sid, "--as", "rita", "--reason", "citation [1] is not needed")
    assert rejected["state"] == "ready-for-review" and rejected["version"] == 2
    diff = cli.run("diff", sid, "1", "2")
    assert diff.returncode == 0 and diff.stdout.startswith("---")
    edited = tmp_path / "edited.md"
    edited.write_text(
        cli.json("show", sid)["markdown"].replace("\n## ", "\n## Desk notes: ", 1), encoding="utf-8"
    )
    after = cli.json("edit", sid, "--file", str(edited), "--as", "gina")
    assert after["version"] == 3 and after["state"] == "ready-for-review"
    assert cli.json("show", sid)["author"] == "gina"
    assert cli.run("edit", sid, "--file", str(tmp_path / "missing.md"), "--as", "gina").returncode == 2
    cancelled = cli.json("cancel", sid, "--as", "gina")
    assert cancelled["state"] == "cancelled"
    assert cli.run("cancel", sid, "--as", "gina").returncode == 4


def test_demo_runs_start_to_published(tmp_path: Path) -> None:
    env = base_env()
    env.pop("PRESSROOM_SECRET")
    done = subprocess.run(
        [PRESSROOM, "demo", "--approve-as", "alice", "--workdir", str(tmp_path / "demo")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "flagged" in done.stdout and "published" in done.stdout
    secret = tmp_path / "demo" / "secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    pages = list((tmp_path / "demo" / "site").glob("*.md"))
    assert len(pages) == 1


def test_demo_without_a_person_stops_at_review(tmp_path: Path) -> None:
    done = subprocess.run(
        [PRESSROOM, "demo", "--workdir", str(tmp_path / "demo")],
        env=base_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "Not approved" in done.stdout
    assert not list((tmp_path / "demo").glob("site/*.md")), "nothing is published without a person"


def test_allowed_roots_confine_corpora_and_destinations(
    tmp_path: Path, corpus: Path, sqlite_url: str
) -> None:
    inside = tmp_path / "sites"
    env = base_env(
        PRESSROOM_DATABASE_URL=sqlite_url,
        PRESSROOM_BROKER_URL="inline://",
        PRESSROOM_ALLOWED_ROOTS=f"{corpus}:{inside}",
    )
    cli = Cli(env, tmp_path)
    outside = cli.run(
        "submit", "--brief", "library", "--corpus", str(corpus), "--dest", "site:/tmp/elsewhere"
    )
    assert outside.returncode == 2 and "outside the allowed roots" in outside.stderr
    foreign = cli.run("submit", "--brief", "library", "--corpus", "/etc", "--dest", f"site:{inside}")
    assert foreign.returncode == 2 and "corpus folder" in foreign.stderr
    ok = cli.json(
        "submit", "--brief", "library network", "--corpus", str(corpus), "--dest", f"site:{inside / 'a'}"
    )
    assert ok["state"] == "ready-for-review"


def test_an_unreachable_webhook_fails_cleanly_and_undoes_the_site(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    from tests.conftest import free_port

    site = tmp_path / "site"
    hook = f"webhook:http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    sid = submit(cli, corpus, f"site:{site}", hook)["saga_id"]
    approved = cli.run("approve", sid, "--version", "1", "--as", "erin", "--json")
    # Approved, and the publish it drove failed.
    assert approved.returncode == 6 and "the publish it started ended failed" in approved.stderr
    assert json.loads(approved.stdout)["state"] == "failed"
    status = cli.json("status", sid)
    assert status["state"] == "failed"
    assert "refused" in status["reason"] or "connect" in status["reason"].lower()
    states = {d["uri"]: d["state"] for d in status["destinations"]}
    assert states == {f"site:{site}": "compensated", hook: "failed"}
    assert not list(site.glob("*.md")) and not list(site.glob("*.tmp")), "nothing half-written"


def test_tracing_disabled_changes_nothing(tmp_path: Path, corpus: Path, sqlite_url: str) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=sqlite_url,
        PRESSROOM_BROKER_URL="inline://",
        OTEL_SDK_DISABLED="true",
        OTEL_TRACES_EXPORTER="otlp",
    )
    cli = Cli(env, tmp_path)
    sid = submit(cli, corpus, f"site:{tmp_path / 'quiet'}")["saga_id"]  # memory: is for in-process tests
    assert cli.json("approve", sid, "--version", "1", "--as", "erin")["version"] == 1
    assert cli.json("status", sid)["state"] == "succeeded"

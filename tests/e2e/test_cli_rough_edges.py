"""The CLI's rough edges, each on its output or exit code through the console script."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT, Cli
from tests.support import in_process


def _submit(cli: Cli, corpus: Path, *dests: str) -> str:
    """A saga in ready-for-review on the console script's database, submitted in this process:
    what these tests read is the output of the commands that follow."""
    brief = "history of the library network"
    return in_process.submit(cli.env, cli.cwd, brief=brief, corpus=corpus, destinations=dests, actor="dana")


def test_status_prints_whole_ids_one_record_per_line_when_piped(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    deep = tmp_path / ("a-folder-with-a-long-name-" * 4) / "site"
    ids = {_submit(cli, corpus, f"site:{deep}") for _ in range(2)}
    listing = cli.run("status")
    assert listing.returncode == 0
    lines = listing.stdout.splitlines()
    assert len(lines) == 2 and {line.split()[0] for line in lines} == ids
    one = cli.run("status", next(iter(ids)))
    assert f"site:{deep}  pending" in one.stdout  # the path whole on one line, not wrapped at 80 columns


def test_status_table_keeps_ids_whole_on_a_narrow_terminal(cli: Cli, corpus: Path) -> None:
    sid = _submit(cli, corpus, f"site:{cli.cwd / 'narrow'}")
    narrow = Cli({**cli.env, "TTY_COMPATIBLE": "1", "COLUMNS": "50"}, cli.cwd)
    shown = narrow.run("status")
    assert shown.returncode == 0 and sid in shown.stdout, shown.stdout


def test_show_never_prints_markup_and_counts_findings_in_good_grammar(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    sid = _submit(cli, corpus, f"site:{cli.cwd / 'markup'}")
    shown = cli.run("show", sid)
    assert shown.returncode == 0
    assert "flagged source" in shown.stdout  # the sample corpus carries an injected instruction
    assert "[yellow]" not in shown.stdout and "[/yellow]" not in shown.stdout and "[bold]" not in shown.stdout
    assert "(0 findings)" in shown.stdout
    body = cli.json("show", sid)["markdown"]
    assert body.splitlines()[0] in shown.stdout.splitlines()  # piped: the markdown as written, not reflowed
    edited = tmp_path / "one-finding.md"
    edited.write_text(
        body.replace("\n## ", "\nA paragraph that cites nothing at all here.\n\n## ", 1), encoding="utf-8"
    )
    assert cli.json("edit", sid, "--file", str(edited), "--as", "erin")["version"] == 2
    again = cli.run("show", sid)
    assert "review: changes_requested (1 finding)" in again.stdout, again.stdout


def test_refusals_read_as_english(cli: Cli, corpus: Path) -> None:
    sid = _submit(cli, corpus, f"site:{cli.cwd / 'grammar'}")
    assert cli.run("cancel", sid, "--as", "olga").returncode == 0
    again = cli.run("cancel", sid, "--as", "olga")
    assert again.returncode == 4
    assert again.stderr.strip() == "error: cannot cancel a saga that is cancelled"


def test_after_cancel_destinations_say_cancelled(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    sid = _submit(cli, corpus, f"site:{tmp_path / 'site'}", f"site:{cli.cwd / 'after-cancel'}")
    out = cli.json("cancel", sid, "--as", "olga")
    assert [d["state"] for d in out["destinations"]] == ["cancelled", "cancelled"]
    assert "pending" not in cli.run("status", sid).stdout


def test_corpus_naming_a_file_says_it_is_not_a_folder(cli: Cli, corpus: Path) -> None:
    done = cli.run(
        "submit", "--brief", "x", "--corpus", str(corpus / "overview.md"), "--dest", f"site:{cli.cwd / 'x'}"
    )
    assert done.returncode == 2
    assert "is a file, not a folder" in done.stderr and "not found" not in done.stderr


def test_diff_of_a_version_with_itself_says_identical(cli: Cli, corpus: Path) -> None:
    sid = _submit(cli, corpus, f"site:{cli.cwd / 'same'}")
    done = cli.run("diff", sid, "1", "1")
    assert done.returncode == 0 and done.stdout == "versions 1 and 1 are identical\n"


def test_receipts_print_as_json_and_a_failure_names_its_destination_once(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    from tests.support.webhook_server import WebhookServer

    with WebhookServer() as hook:
        sid = _submit(cli, corpus, f"webhook:{hook.url}")
        assert cli.run("approve", sid, "--version", "1", "--as", "erin").returncode == 0
        line = next(
            line for line in cli.run("status", sid).stdout.splitlines() if line.startswith("webhook:")
        )
    assert re.search(r"\{\"[a-z_]+\": ", line) and "{'" not in line, line
    with WebhookServer("reject") as hook:
        url = hook.url
        sid = _submit(cli, corpus, f"webhook:{url}")
        # Approved, and the publish it drove failed: exit 6, not a refusal.
        assert cli.run("approve", sid, "--version", "1", "--as", "erin").returncode == 6
        reason = cli.json("status", sid)["reason"]
    assert reason.count(url) == 1, reason


def test_git_commits_name_their_approver(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    repo = tmp_path / "docs-repo"
    sid = _submit(cli, corpus, f"git:{repo}")
    assert cli.run("approve", sid, "--version", "1", "--as", "erin").returncode == 0
    message = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%B"], capture_output=True, text=True, check=True
    ).stdout
    assert "Pressroom-Approved-By: erin" in message.splitlines()


def test_readme_examples_work_in_a_clone() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "../shared" not in readme and "DESIGN.md" not in readme
    reconcile = [line for line in readme.splitlines() if "reconcile" in line and "--outcome" in line]
    assert reconcile and all("--as" in line for line in reconcile)


def test_the_demos_last_line_is_a_trace_command_that_works_from_anywhere(tmp_path: Path) -> None:
    from tests.conftest import PRESSROOM, base_env

    env = base_env()
    done = subprocess.run(
        [PRESSROOM, "demo", "--approve-as", "alice", "--workdir", str(tmp_path / "demo")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("trace: "), last
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    traced = subprocess.run(
        last.removeprefix("trace: "),
        shell=True,
        env=env,
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert traced.returncode == 0, traced.stderr
    assert "publish" in traced.stdout
    shown = done.stdout
    assert (
        "Millbrook" in shown and "automated review: pass, 0 findings" in shown
    )  # the body before the prompt

"""A hostile `git:` repository, through the console script: nothing it configures runs,
and a `.git` that leads out of the allowed roots gets no commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import Cli, base_env
from tests.integration.test_git_runs_nothing import markers, new_repo, plant_everything


def make_cli(tmp_path: Path, roots: Path) -> Cli:
    """Allowed roots: the published folder and the corpus (`tmp_path/corpus`), nothing else."""
    return Cli(
        base_env(
            PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'pressroom.db'}",
            PRESSROOM_BROKER_URL="inline://",
            PRESSROOM_ALLOWED_ROOTS=os.pathsep.join([str(roots), str(tmp_path / "corpus")]),
        ),
        tmp_path,
    )


def submit(cli: Cli, corpus: Path, dest: str) -> str:
    out = cli.json(
        "submit", "--brief", "history of the library network", "--corpus", str(corpus), "--dest", dest,
        "--as", "dana",
    )  # fmt: skip
    return str(out["saga_id"])


def test_publishing_into_a_booby_trapped_repository_runs_none_of_it(tmp_path: Path, corpus: Path) -> None:
    roots = tmp_path / "published"
    roots.mkdir()
    repo = new_repo(roots / "repo")
    plant_everything(tmp_path, repo, via_include=True)
    cli = make_cli(tmp_path, roots)
    sid = submit(cli, corpus, f"git:{repo}")
    done = cli.run("approve", sid, "--version", "1", "--as", "erin")
    assert done.returncode == 0, done.stderr
    status = cli.json("status", sid)
    assert status["state"] == "succeeded"
    commit = status["destinations"][0]["receipt"]["commit"]
    shown = subprocess.run(
        ["git", "-c", "log.showSignature=false", "log", "-1", "--format=%H", commit],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert shown.stdout.strip() == commit
    assert markers(tmp_path) == []


def test_a_git_file_leading_out_of_the_allowed_roots_gets_no_commit(tmp_path: Path, corpus: Path) -> None:
    roots = tmp_path / "published"
    roots.mkdir()
    outside = new_repo(tmp_path / "private-repo")
    target = roots / "site"
    target.mkdir()
    (target / ".git").write_text(f"gitdir: {outside / '.git'}\n")
    cli = make_cli(tmp_path, roots)
    sid = submit(cli, corpus, f"git:{target}")
    done = cli.run("approve", sid, "--version", "1", "--as", "erin")
    assert done.returncode == 6, done.stderr  # approved; the publish it started failed
    [line] = done.stderr.splitlines()
    assert "outside" in line and "Traceback" not in done.stderr
    assert cli.json("status", sid)["state"] == "failed"
    head = subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=outside, capture_output=True)
    assert head.returncode != 0, "nothing was committed in the repository outside the roots"

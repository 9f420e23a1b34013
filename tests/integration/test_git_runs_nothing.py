"""A `git:` target repository is data: whatever its config names, Pressroom's git runs none of it.

Each test plants, in a real repository, a program that touches a marker file,
named where git would run it (signature display, fsmonitor, hooks, content
filters, diff and merge drivers, an included config file, ...); then it
publishes, reads status and compensates through the adapter, and checks that
the commit exists and that no marker was ever made. A `.git` that leads out
of the target folder is refused and nothing lands there.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.core.errors import NotApplied
from sagas.destinations.git_run import UnsafeRepository, neutralise
from sagas.destinations.registry import open_destination
from tests.contracts.test_destinations import make_version


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def new_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


def marker_script(folder: Path, name: str) -> Path:
    """An executable that touches `markers/<name>` (and passes stdin through, as a filter would)."""
    markers = folder / "markers"
    markers.mkdir(exist_ok=True)
    script = folder / f"{name}.sh"
    script.write_text(f'#!/bin/sh\ntouch "{markers / name}"\ncat\n')
    script.chmod(0o755)
    return script


def markers(folder: Path) -> list[str]:
    found = folder / "markers"
    return sorted(p.name for p in found.iterdir()) if found.exists() else []


def config(repo: Path, key: str, value: str, *, file: Path | None = None) -> None:
    where = ["--file", str(file)] if file else []
    subprocess.run(["git", "-C", str(repo), "config", *where, key, value], check=True)


def plant_everything(tmp_path: Path, repo: Path, *, via_include: bool) -> None:
    """Every program-running key we know of, in the repo's config or in a file it includes."""
    target = tmp_path / "included.cfg" if via_include else None
    if target is not None:
        target.write_text("")
        config(repo, "include.path", str(target))
    settings = {
        "log.showSignature": "true",
        "gpg.program": str(marker_script(tmp_path, "gpg")),
        "gpg.ssh.program": str(marker_script(tmp_path, "gpg-ssh")),
        "commit.gpgSign": "true",
        "core.fsmonitor": str(marker_script(tmp_path, "fsmonitor")),
        "core.hooksPath": str(tmp_path / "hooks"),
        "core.pager": str(marker_script(tmp_path, "pager")),
        "core.editor": str(marker_script(tmp_path, "editor")),
        "diff.external": str(marker_script(tmp_path, "external-diff")),
        "filter.x.clean": str(marker_script(tmp_path, "clean")),
        "filter.x.smudge": str(marker_script(tmp_path, "smudge")),
        "diff.x.textconv": str(marker_script(tmp_path, "textconv")),
        "merge.x.driver": str(marker_script(tmp_path, "merge")),
        "trailer.k.command": str(marker_script(tmp_path, "trailer")),
        "credential.helper": str(marker_script(tmp_path, "credential")),
        "core.sshCommand": str(marker_script(tmp_path, "ssh")),
        "pager.log": str(marker_script(tmp_path, "pager-log")),
    }
    for key, value in settings.items():
        config(repo, key, value, file=target)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "commit-msg", "prepare-commit-msg", "post-commit", "reference-transaction"):
        script = hooks / hook
        script.write_text(f'#!/bin/sh\ntouch "{tmp_path / "markers" / hook}"\n')
        script.chmod(0o755)
        (repo / ".git" / "hooks" / hook).write_text(script.read_text())
        (repo / ".git" / "hooks" / hook).chmod(0o755)
    (repo / ".gitattributes").write_text("*.md filter=x diff=x merge=x\n")
    git(repo, "-c", "core.hooksPath=/dev/null", "-c", "filter.x.clean=cat", "-c", "filter.y.process=",
        "-c", "commit.gpgSign=false", "-c", "core.fsmonitor=false", "add", ".gitattributes")  # fmt: skip
    git(repo, "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "core.fsmonitor=false",
        "-c", "filter.x.clean=cat", "-c", "filter.y.process=", "commit", "-q", "-m", "attributes")  # fmt: skip
    # A signed commit that a search for k1 finds: showing it runs the signature program.
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    parent = git(repo, "rev-parse", "HEAD").strip()
    signed = (
        f"tree {tree}\nparent {parent}\nauthor A <a@x> 0 +0000\ncommitter A <a@x> 0 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQ==\n -----END PGP SIGNATURE-----\n\nmentions k1\n"
    )
    sha = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=repo, input=signed, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    git(repo, "-c", "core.hooksPath=/dev/null", "update-ref", "HEAD", sha)


@pytest.mark.parametrize("via_include", [False, True], ids=["own-config", "included-config"])
def test_nothing_the_repository_configures_runs_on_publish_status_and_compensate(
    tmp_path: Path, via_include: bool
) -> None:
    repo = new_repo(tmp_path / "repo")
    plant_everything(tmp_path, repo, via_include=via_include)
    dest = open_destination(f"git:{repo}", timeout=10)
    receipt = dest.publish("k1", make_version())
    assert dest.publish("k1", make_version()) == receipt  # the replay reads history: `git log`
    assert dest.status("k1").kind == "applied"
    assert git(repo, "log", "-1", "--format=%H").strip() == receipt["commit"]
    assert "Pressroom-Idempotency-Key: k1" in git(repo, "log", "-1", "--format=%B")
    dest.publish("k2", make_version("Second Page"))
    dest.compensate("k1", receipt)
    assert dest.status("k1").kind == "absent"
    assert not (repo / "quarterly-report.md").exists()
    assert markers(tmp_path) == []


def test_a_long_running_filter_process_never_starts(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    config(repo, "filter.y.process", str(marker_script(tmp_path, "process")))
    config(repo, "filter.y.required", "true")
    (repo / ".gitattributes").write_text("*.md filter=y\n")
    dest = open_destination(f"git:{repo}", timeout=10)
    receipt = dest.publish("k1", make_version())
    assert git(repo, "log", "-1", "--format=%H").strip() == receipt["commit"]
    dest.compensate("k1", receipt)
    assert markers(tmp_path) == []
    # The user's own git would start it (and fail: the script does not speak the protocol).
    (repo / "page.md").write_text("text\n")
    subprocess.run(["git", "add", "page.md"], cwd=repo, capture_output=True)
    assert markers(tmp_path) == ["process"]


def test_the_markers_would_be_made_by_a_plain_git(tmp_path: Path) -> None:
    """The planted programs are real: the same commands with the user's git run them."""
    repo = new_repo(tmp_path / "repo")
    plant_everything(tmp_path, repo, via_include=True)
    (repo / "page.md").write_text("text\n")
    subprocess.run(["git", "add", "page.md"], cwd=repo, capture_output=True)
    subprocess.run(["git", "commit", "-q", "-m", "m"], cwd=repo, capture_output=True)
    subprocess.run(["git", "log", "-F", "--grep=k1"], cwd=repo, capture_output=True)
    assert {"clean", "fsmonitor", "pre-commit", "gpg"} <= set(markers(tmp_path))


def test_a_config_defined_hook_command_is_refused(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    config(repo, "hook.audit.command", str(marker_script(tmp_path, "hook-command")))
    config(repo, "hook.audit.event", "post-commit")
    with pytest.raises(NotApplied, match="hook commands"):
        open_destination(f"git:{repo}", timeout=10).publish("k1", make_version())
    assert markers(tmp_path) == []
    assert subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=repo).returncode != 0


def test_neutralise_overrides_every_named_driver_and_refuses_hook_commands() -> None:
    names = "\n".join(
        [
            "core.bare",
            "filter.lfs.clean",
            "filter.lfs.process",
            "filter.lfs.required",
            "diff.pdf.textconv",
            "merge.ours.driver",
            "trailer.sign.command",
            "gpg.x509.program",
            "credential.https://example.com.helper",
            "pager.log",
            "submodule.lib.update",
            "user.name",
        ]
    )
    got = neutralise(names)
    pairs = dict(zip(got[0::2], got[1::2], strict=True))
    assert set(pairs) == {"-c"} or all(flag == "-c" for flag in got[0::2])
    assert sorted(got[1::2]) == sorted(
        [
            "filter.lfs.clean=",
            "filter.lfs.process=",
            "filter.lfs.required=false",
            "diff.pdf.textconv=",
            "merge.ours.driver=false",
            "trailer.sign.command=",
            "gpg.x509.program=false",
            "credential.https://example.com.helper=",
            "pager.log=false",
            "submodule.lib.update=none",
        ]
    )
    with pytest.raises(UnsafeRepository):
        neutralise("user.name\nhook.x.command\n")


# -- a git directory that leads elsewhere ---------------------------------------------


def _head(repo: Path) -> str | None:
    done = subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=repo, capture_output=True)
    return done.stdout.decode().strip() if done.returncode == 0 else None


def test_a_git_file_pointing_at_another_repository_is_refused(tmp_path: Path) -> None:
    elsewhere = new_repo(tmp_path / "elsewhere")
    target = tmp_path / "target"
    target.mkdir()
    (target / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    dest = open_destination(f"git:{target}", timeout=10)
    with pytest.raises(NotApplied, match="outside"):
        dest.publish("k1", make_version())
    assert _head(elsewhere) is None, "nothing was committed in the other repository"
    assert dest.status("k1").kind == "unknown"
    with pytest.raises(NotApplied, match="outside"):
        dest.compensate("k1", {})


def test_a_relative_git_file_that_climbs_out_is_refused(tmp_path: Path) -> None:
    new_repo(tmp_path / "elsewhere")
    target = tmp_path / "target"
    target.mkdir()
    (target / ".git").write_text("gitdir: ../elsewhere/.git\n")
    with pytest.raises(NotApplied, match="outside"):
        open_destination(f"git:{target}", timeout=10).publish("k1", make_version())
    assert _head(tmp_path / "elsewhere") is None


def test_a_symlinked_git_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = new_repo(tmp_path / "elsewhere")
    target = tmp_path / "target"
    target.mkdir()
    (target / ".git").symlink_to(elsewhere / ".git", target_is_directory=True)
    with pytest.raises(NotApplied, match="symbolic link"):
        open_destination(f"git:{target}", timeout=10).publish("k1", make_version())
    assert _head(elsewhere) is None


def test_a_commondir_leading_out_is_refused(tmp_path: Path) -> None:
    elsewhere = new_repo(tmp_path / "elsewhere")
    target = new_repo(tmp_path / "target")
    (target / ".git" / "commondir").write_text(f"{elsewhere / '.git'}\n")
    with pytest.raises(NotApplied, match="outside"):
        open_destination(f"git:{target}", timeout=10).publish("k1", make_version())
    assert _head(elsewhere) is None and _head(target) is None


def test_a_linked_objects_folder_leading_out_is_refused(tmp_path: Path) -> None:
    elsewhere = new_repo(tmp_path / "elsewhere")
    target = new_repo(tmp_path / "target")
    objects = target / ".git" / "objects"
    subprocess.run(["rm", "-rf", str(objects)], check=True)
    objects.symlink_to(elsewhere / ".git" / "objects", target_is_directory=True)
    with pytest.raises(NotApplied, match="outside"):
        open_destination(f"git:{target}", timeout=10).publish("k1", make_version())
    assert not any((elsewhere / ".git" / "objects").glob("??/*"))


def test_a_git_file_inside_the_folder_is_followed(tmp_path: Path) -> None:
    """A `gitdir:` link that stays inside the target is a repository like any other."""
    target = tmp_path / "target"
    target.mkdir()
    subprocess.run(
        ["git", "init", "-q", "-b", "main", "--separate-git-dir", str(target / "store"), str(target)]
    )
    assert (target / ".git").is_file()
    receipt = open_destination(f"git:{target}", timeout=10).publish("k1", make_version())
    assert _head(target) == receipt["commit"]


def test_a_core_worktree_in_the_config_does_not_move_the_page(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config(repo, "core.worktree", str(elsewhere))
    open_destination(f"git:{repo}", timeout=10).publish("k1", make_version())
    assert list(elsewhere.iterdir()) == []
    assert (repo / "quarterly-report.md").exists()

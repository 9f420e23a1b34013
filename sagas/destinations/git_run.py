"""Running `git` on a repository Pressroom does not own, so that it runs nothing the repository configures.

Owns: finding the repository's git directory (and refusing one that leads out
of the folder), making a new repository in one atomic step, the child's
environment, the `-c` options that switch off every program a config may name,
and the one function that runs `git`. The `git:` adapter (`git.py`) uses only
`GitRepo`.

What a target repository may say, and what it gets:

- Its own `.git/config` (and every file it includes, `include.path` and
  `includeIf`) is still read by git: there is no switch for that. Options given
  with `-c` win over every config file, so each key that names a program is
  set on the command line (`FIXED`: hooks, fsmonitor, pager, editors, signing
  and signature display, ssh, credential helpers, askpass, external diff,
  transports, automatic gc/maintenance). Keys with a name of the repository's
  choosing (`filter.<x>.clean|smudge|process`, `diff.<x>.command|textconv`,
  `merge.<x>.driver`, `trailer.<x>.command|cmd`, `gpg.<x>.program`,
  `credential.<url>.helper`, `pager.<cmd>`, `submodule.<x>.update`) are read
  first with `git config --name-only --list` (which runs nothing) at the start
  of every operation, and each is overridden the same way (`neutralise`).
  Config-defined hooks (`hook.<x>.command`) cannot be switched off that way:
  such a repository is refused.
- Each call also says it on the command itself where git has a flag for it:
  `--no-pager`, `commit --no-verify --no-gpg-sign`,
  `log --no-show-signature --no-ext-diff --no-textconv`.
- The environment: no `GIT_*` of the caller (a surrounding `GIT_DIR` would
  redirect everything), `GIT_DIR` and `GIT_WORK_TREE` set to the checked paths
  (so a `core.worktree` in the config does not move the working tree and no
  parent repository is ever discovered), no system or global config
  (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), no system attributes,
  `HOME` and `XDG_CONFIG_HOME` an empty private folder, no replace refs, a
  fixed identity.
- The git directory must lie inside the destination folder (which the intent
  transaction has already checked against `PRESSROOM_ALLOWED_ROOTS`): a
  symbolic link as `.git`, a `.git` file (`gitdir: …`) or a `commondir` that
  leads elsewhere, or a link inside the git directory that does, is refused
  (`UnsafeRepository`), so a commit never lands in another repository.

Left: a person who can rewrite `.git/config` *while* an operation runs could
add a new driver name between the listing and a later command of that
operation; whoever can write the repository at will is trusted as its owner
(docs/security.md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

IDENTITY = ("Pressroom", "pressroom@localhost")
OFF = "false"  # a program of ours that does nothing, where a key must name one
# Every key that names a program git may start, set so that none of the repository's runs.
FIXED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", OFF),
    ("sequence.editor", OFF),
    ("core.askPass", OFF),
    ("core.sshCommand", OFF),
    ("core.alternateRefsCommand", ""),
    ("core.bare", "false"),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", OFF),
    ("gpg.openpgp.program", OFF),
    ("gpg.x509.program", OFF),
    ("gpg.ssh.program", OFF),
    ("gpg.ssh.defaultKeyCommand", OFF),
    ("diff.external", ""),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("uploadpack.packObjectsHook", ""),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
FIXED_OPTIONS: tuple[str, ...] = tuple(part for key, value in FIXED for part in ("-c", f"{key}={value}"))
# Keys with a name of the repository's choosing, and what each is set to.
_NAMED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"filter\..+\.(clean|smudge|process)"), ""),
    (re.compile(r"filter\..+\.required"), "false"),
    (re.compile(r"diff\..+\.(command|textconv)"), ""),
    (re.compile(r"merge\..+\.driver"), OFF),
    (re.compile(r"trailer\..+\.(command|cmd)"), ""),
    (re.compile(r"gpg\..+\.program"), OFF),
    (re.compile(r"credential\..+\.helper"), ""),
    (re.compile(r"pager\..+"), "false"),
    (re.compile(r"submodule\..+\.update"), "none"),
)
_REFUSED = re.compile(r"hook\..+")
GIT_LINK = "gitdir:"


class GitFailed(Exception):
    """A `git` command exited non-zero, timed out, or could not start."""


class UnsafeRepository(GitFailed):
    """The target's git directory leads outside it, or its config asks for what cannot be switched off."""


def neutralise(config_names: str) -> tuple[str, ...]:
    """`-c` options overriding every program-naming key in `git config --name-only --list` output.

    Pure. Raises `UnsafeRepository` for a key that no option can switch off."""
    out: list[str] = []
    for name in sorted(set(config_names.lower().split())):
        if _REFUSED.fullmatch(name):
            raise UnsafeRepository(f"its config defines hook commands ({name}); refused")
        value = next((value for pattern, value in _NAMED if pattern.fullmatch(name)), None)
        if value is not None:
            out += ["-c", f"{name}={value}"]
    return tuple(out)


_home_lock = threading.Lock()
_home: list[str] = []


def _empty_home() -> str:
    """A private empty folder for HOME and XDG_CONFIG_HOME: no user config, attributes or ignores."""
    with _home_lock:
        if not _home or not os.path.isdir(_home[0]):
            _home[:] = [tempfile.mkdtemp(prefix="pressroom-git-home-")]
        return _home[0]


def git_env(gitdir: Path | None, worktree: Path | None) -> dict[str, str]:
    """The child's environment (not a setting: nothing here is read as configuration)."""
    env = {
        k: v
        for k, v in os.environ.items()  # noqa: TID251
        if not k.startswith("GIT_") and k not in ("SSH_ASKPASS", "XDG_CONFIG_HOME", "HOME")
    }
    name, email = IDENTITY
    home = _empty_home()
    env.update(
        HOME=home,
        XDG_CONFIG_HOME=home,
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=email,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_TERMINAL_PROMPT="0",
    )
    if gitdir is not None and worktree is not None:
        env.update(GIT_DIR=str(gitdir), GIT_WORK_TREE=str(worktree))
    return env


def run_git(
    args: tuple[str, ...],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    options: tuple[str, ...] = (),
    stdin: str | None = None,
) -> str:
    """Run `git --no-pager <FIXED> <options> <args>`; its stdout, or `GitFailed`."""
    try:
        done = subprocess.run(
            ["git", "--no-pager", *FIXED_OPTIONS, *options, *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitFailed(f"git {args[0]} timed out after {timeout}s") from exc
    except OSError as exc:
        raise GitFailed(f"git {args[0]} could not run: {exc}") from exc
    if done.returncode != 0:
        raise GitFailed(f"git {args[0]} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def find_gitdir(repo: Path) -> Path | None:
    """The git directory of the folder `repo` (resolved), None when it has no `.git`.

    `UnsafeRepository` when `.git` is a symbolic link, or its `gitdir:` or
    `commondir`, or a link among the git directory's entries, leads outside `repo`."""
    folder = repo.resolve()
    dotgit = folder / ".git"
    if dotgit.is_symlink():
        raise UnsafeRepository(f"{dotgit} is a symbolic link; refused")
    if not dotgit.exists():
        return None
    if dotgit.is_file():
        text = dotgit.read_text("utf-8", errors="replace").strip()
        if not text.startswith(GIT_LINK):
            raise UnsafeRepository(f"{dotgit} is a file but not a git link; refused")
        gitdir = (folder / text[len(GIT_LINK) :].strip()).resolve()
    else:
        gitdir = dotgit
    if not _inside(gitdir, folder):
        raise UnsafeRepository(f"{dotgit} leads to {gitdir}, outside {folder}; refused")
    common = gitdir / "commondir"
    if common.exists() or common.is_symlink():
        target = (gitdir / common.read_text("utf-8", errors="replace").strip()).resolve()
        if not _inside(target, folder):
            raise UnsafeRepository(f"{common} leads to {target}, outside {folder}; refused")
    for entry in gitdir.iterdir():
        if entry.is_symlink() and not _inside(entry.resolve(), folder):
            raise UnsafeRepository(f"{entry} links to {entry.resolve()}, outside {folder}; refused")
    return gitdir


def create_repository(repo: Path, *, timeout: float) -> None:
    """Make `repo/.git` appear whole or not at all: `git init` (no templates, so no
    sample hooks) in a scratch folder inside `repo`, then one `rename` into place.
    A concurrent creator that got there first wins; its repository is used."""
    scratch = Path(tempfile.mkdtemp(prefix=".git-init-", dir=repo))
    try:
        run_git(
            ("init", "-q", "-b", "main", "--template=", str(scratch)),
            cwd=scratch,
            env=git_env(None, None),
            timeout=timeout,
        )
        try:
            os.rename(scratch / ".git", repo / ".git")
        except OSError:
            if not (repo / ".git").exists():
                raise
            # Another publisher made it first (a rename onto a non-empty folder fails).
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


__all__ = [
    "FIXED",
    "GitFailed",
    "UnsafeRepository",
    "create_repository",
    "find_gitdir",
    "git_env",
    "neutralise",
    "run_git",
]

"""`git:PATH`: a git repository, one commit per publish.

- URI: `git:PATH`. A PATH that does not exist, or has no `.git` of its own,
  is made a repository with `git init -b main` on first publish: pointing
  Pressroom at an empty folder is how a publishing repository starts. (A
  folder inside another repository thus gets its own nested repository.)
- Idempotency: each publish commit carries the trailer
  `Pressroom-Idempotency-Key: <key>`; before committing, history is searched
  for it and a match answers with its receipt (`commit`, `path`, `key`). The
  commit also names its approver (`Pressroom-Approved-By: NAME`).
- Status: the same history search: the newest commit naming the key decides,
  a publish commit is `applied`, a compensation commit (or none) is `absent`;
  a failing `git` is `unknown`.
- Compensation: `git revert` of the publish commit, committed with the
  trailer `Pressroom-Compensates: <key>`; a key already compensated, or never
  published, is a no-op. A revert that conflicts with later commits is
  refused (`NotApplied`) and aborted.

A failed or timed-out `git commit` is settled at once by searching history
for the key: found means applied, not found means not applied, and a search
that fails too means `MaybeApplied`. Publishers of one repository are
serialised by `flock` on `.git/pressroom.lock`. Git runs with a fixed
identity and without the user's global or system config, so it behaves the
same on a bare CI machine.

The repository is data, not code: every command runs with hooks off
(`core.hooksPath=/dev/null`), no filesystem monitor (`core.fsmonitor=false`)
and no commit signing, so a `pre-commit` hook or an `fsmonitor` script
planted in the target's `.git` never runs as the server's user. Content
filters (`filter.<name>.clean|smudge|process`) named in the repository's own
config are blanked and its merge drivers replaced by `false` (a revert that
needs one is refused), so no command from `.git/config` runs either.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import PublishedVersion, StatusAnswer
from sagas.destinations.files import atomic_write, exclusive_lock
from sagas.destinations.slugs import check_key, contained_path, slugify

KEY_TRAILER = "Pressroom-Idempotency-Key"
COMPENSATES_TRAILER = "Pressroom-Compensates"
PATH_TRAILER = "Pressroom-Path"
APPROVER_TRAILER = "Pressroom-Approved-By"
IDENTITY = ("Pressroom", "pressroom@localhost")
# Overrides for whatever the target repository's own config says (see the module docstring).
SAFE_CONFIG = (
    "-c",
    f"core.hooksPath={os.devnull}",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgSign=false",
)
_FILTER = re.compile(r"filter\.(.+)\.(clean|smudge|process)")
_MERGE_DRIVER = re.compile(r"merge\.(.+)\.driver")


def driver_overrides(config_names: str) -> tuple[str, ...]:
    """`-c` options that neutralise every filter and merge driver in `git config --name-only --list` output."""
    out: list[str] = []
    for name in sorted(set(config_names.split())):
        if _FILTER.fullmatch(name):
            out += ["-c", f"{name}="]
        elif _MERGE_DRIVER.fullmatch(name):
            out += ["-c", f"{name}=false"]
    return tuple(out)


class GitFailed(Exception):
    """A `git` command exited non-zero, timed out, or could not start."""


@dataclass(frozen=True)
class _Found:
    commit: str
    subject: str
    path: str
    compensated: bool


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _git_env() -> dict[str, str]:
    # Not a setting: the child's environment. GIT_* variables are dropped
    # because GIT_DIR / GIT_INDEX_FILE from a surrounding hook would redirect
    # every command to another repository.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # noqa: TID251
    name, email = IDENTITY
    env.update(
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=email,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
    )
    return env


class GitDestination:
    """A `Destination` committing pages into one local git repository."""

    form: ClassVar[str] = "git:PATH"

    def __init__(self, repo: Path | str, *, uri: str | None = None, timeout: float = 10.0) -> None:
        self.repo = Path(repo).expanduser()
        self.uri = uri or f"git:{repo}"
        self.timeout = timeout
        self._overrides: tuple[str, ...] | None = None

    @classmethod
    def check_target(cls, target: str) -> None:
        if not target.strip() or "\0" in target:
            raise InvalidInput("git: needs a repository path, as in git:PATH", target=target)

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float) -> GitDestination:
        cls.check_target(target)
        return cls(target, uri=uri, timeout=timeout)

    # -- the port -----------------------------------------------------------

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        check_key(key)
        relpath = f"{slugify(version.slug or version.title)}.md"
        try:
            lock = self._ensure_repo()
        except (GitFailed, OSError) as exc:
            raise NotApplied(f"{self.uri}: cannot use {self.repo} as a repository: {exc}", key=key) from exc
        with exclusive_lock(lock):
            try:
                found = self._find(key)
            except GitFailed as exc:
                raise NotApplied(f"{self.uri}: cannot read history: {exc}", key=key) from exc
            if found is not None and not found.compensated:
                return self._receipt(key, found)
            try:
                atomic_write(contained_path(self.repo, relpath), version.markdown.encode("utf-8"))
                self._git("add", "--", relpath)
            except (GitFailed, OSError) as exc:
                self._discard(relpath)
                raise NotApplied(
                    f"{self.uri}: publish of {key} failed before commit: {exc}", key=key
                ) from exc
            message = (
                f"Publish {_one_line(version.title)} (v{version.version})\n\n"
                f"Pressroom-Saga: {_one_line(version.saga_id)}\n"
                f"Pressroom-Version-Digest: {_one_line(version.version_digest)}\n"
                f"{PATH_TRAILER}: {relpath}\n"
                + (f"{APPROVER_TRAILER}: {_one_line(version.approver)}\n" if version.approver else "")
                + f"{KEY_TRAILER}: {key}\n"
            )
            commit_error: Exception | None = None
            try:
                self._git("commit", "-q", "--allow-empty", "-F", "-", "--", relpath, stdin=message)
            except GitFailed as exc:
                commit_error = exc
            found = self._settle(key, commit_error)
            if found is not None and not found.compensated:
                return self._receipt(key, found)
            if commit_error is None:  # say, a commit-msg hook dropped the trailer
                raise MaybeApplied(f"{self.uri}: commit succeeded but carries no key {key}", key=key)
            self._discard(relpath)
            raise NotApplied(f"{self.uri}: commit of {key} failed: {commit_error}", key=key)

    def status(self, key: str) -> StatusAnswer:
        check_key(key)
        if not (self.repo / ".git").exists():
            return StatusAnswer(kind="absent", detail="no repository yet")
        try:
            found = self._find(key)
        except GitFailed as exc:
            return StatusAnswer(kind="unknown", detail=str(exc))
        if found is None or found.compensated:
            return StatusAnswer(kind="absent")
        return StatusAnswer(kind="applied", receipt=self._receipt(key, found))

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        check_key(key)
        if not (self.repo / ".git").exists():
            return
        try:
            lock = self._lock_path()
        except GitFailed as exc:
            raise NotApplied(f"{self.uri}: cannot compensate {key}: {exc}", key=key) from exc
        with exclusive_lock(lock):
            try:
                found = self._find(key)
            except GitFailed as exc:
                raise NotApplied(f"{self.uri}: cannot read history: {exc}", key=key) from exc
            if found is None or found.compensated:
                return
            try:
                if self._ok("rev-parse", "-q", "--verify", "REVERT_HEAD"):
                    self._git("revert", "--abort")  # left by an interrupted compensation
                self._git("revert", "--no-commit", found.commit)
            except GitFailed as exc:
                self._ok("revert", "--abort")
                raise NotApplied(f"{self.uri}: cannot revert {found.commit}: {exc}", key=key) from exc
            message = (
                f'Revert "{found.subject}"\n\nThis reverts commit {found.commit}.\n\n'
                f"{COMPENSATES_TRAILER}: {key}\n"
            )
            commit_error: Exception | None = None
            try:
                self._git("commit", "-q", "--allow-empty", "-F", "-", stdin=message)
            except GitFailed as exc:
                commit_error = exc
            settled = self._settle(key, commit_error)
            if settled is not None and settled.compensated:
                return
            if commit_error is None:
                raise MaybeApplied(f"{self.uri}: revert commit carries no key {key}", key=key)
            self._ok("revert", "--abort")
            raise NotApplied(f"{self.uri}: revert commit for {key} failed: {commit_error}", key=key)

    # -- git ------------------------------------------------------------------

    def _git(self, *args: str, stdin: str | None = None) -> str:
        if self._overrides is None and (self.repo / ".git").exists():
            # Read with the fixed overrides only; reading config runs nothing.
            self._overrides = driver_overrides(self._run("config", "--name-only", "--list"))
        return self._run(*args, stdin=stdin, prefix=self._overrides or ())

    def _run(self, *args: str, stdin: str | None = None, prefix: tuple[str, ...] = ()) -> str:
        try:
            done = subprocess.run(
                ["git", *SAFE_CONFIG, *prefix, *args],
                cwd=self.repo,
                env=_git_env(),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise GitFailed(f"git {args[0]} timed out after {self.timeout}s") from exc
        except OSError as exc:
            raise GitFailed(f"git {args[0]} could not run: {exc}") from exc
        if done.returncode != 0:
            raise GitFailed(f"git {args[0]} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def _ok(self, *args: str) -> bool:
        try:
            self._git(*args)
        except GitFailed:
            return False
        return True

    def _ensure_repo(self) -> Path:
        """Make PATH a repository if it is not one; return the lock file."""
        if self.repo.exists() and not self.repo.is_dir():
            raise GitFailed(f"{self.repo} exists and is not a folder")
        self.repo.mkdir(parents=True, exist_ok=True)
        if not (self.repo / ".git").exists():
            self._git("init", "-q", "-b", "main")
        return self._lock_path()

    def _lock_path(self) -> Path:
        return Path(self._git("rev-parse", "--absolute-git-dir").strip()) / "pressroom.lock"

    def _find(self, key: str) -> _Found | None:
        """The newest commit whose trailers name `key`, publish or compensation."""
        if not self._ok("rev-parse", "-q", "--verify", "HEAD"):
            return None  # no commits yet
        fields = "%x1f".join(
            ["%H", "%s"]
            + [
                f"%(trailers:key={name},valueonly)"
                for name in (KEY_TRAILER, COMPENSATES_TRAILER, PATH_TRAILER)
            ]
        )
        out = self._git("log", "-F", f"--grep={key}", f"--format={fields}%x1e", "HEAD")
        for record in out.split("\x1e"):
            parts = record.strip("\n").split("\x1f")
            if len(parts) != 5:
                continue
            sha, subject, keys, compensates, paths = parts
            if key in compensates.split():
                return _Found(sha, subject, "", compensated=True)
            if key in keys.split():
                return _Found(sha, subject, (paths.split() or [""])[0], compensated=False)
        return None

    def _settle(self, key: str, commit_error: Exception | None) -> _Found | None:
        """After a commit attempt, let history say what happened."""
        try:
            return self._find(key)
        except GitFailed as exc:
            raise MaybeApplied(
                f"{self.uri}: commit for {key} {'failed' if commit_error else 'ran'} "
                f"and history cannot be read: {exc}",
                key=key,
            ) from exc

    def _discard(self, relpath: str) -> None:
        """Best effort: put `relpath` back as HEAD has it, after a publish that did not commit."""
        self._ok("reset", "-q", "--", relpath)
        if not self._ok("checkout", "-q", "HEAD", "--", relpath):
            try:
                contained_path(self.repo, relpath).unlink(missing_ok=True)
            except (OSError, InvalidInput):
                pass

    @staticmethod
    def _receipt(key: str, found: _Found) -> dict[str, Any]:
        return {"commit": found.commit, "path": found.path, "key": key}


__all__ = ["COMPENSATES_TRAILER", "KEY_TRAILER", "GitDestination", "GitFailed"]

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
that fails too means `MaybeApplied`.

Concurrency: a new repository appears whole or not at all (`git init` in a
scratch folder, then one `rename` of its `.git` into place; a concurrent
creator that lost the rename uses the winner's), so every publisher finds a
complete `.git` and then serialises on `flock` of `.git/pressroom.lock`,
across threads and processes.

What it never runs: anything the target repository configures. No hook
(`core.hooksPath=/dev/null`, `commit --no-verify`), no filesystem monitor,
no content filter, diff or merge driver, no signing program (signing off,
signatures never shown), no pager, editor, ssh, credential helper or
transport, no automatic gc; config-defined hook commands make the
repository refused. Git runs without the system, global or user config, with
a fixed identity, a private empty HOME and `GIT_DIR`/`GIT_WORK_TREE` pinned to
the checked folder; a `.git` link, `gitdir:` file or `commondir` that leads
out of the folder is refused, so no commit lands elsewhere. How: `sagas/destinations/git_run.py`.
Why not a library such as dulwich: its porcelain runs the repository's hooks
unless told not to and (in recent versions) its configured filter drivers,
so it needs the same care, and only its object layer would be free of it at
the price of re-implementing `log --grep`, `revert` and index updates; git
itself, told what not to run, keeps git's own semantics for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import OpenOptions, PublishedVersion, StatusAnswer
from sagas.destinations.files import atomic_write, exclusive_lock
from sagas.destinations.git_run import (
    IDENTITY,
    GitFailed,
    UnsafeRepository,
    create_repository,
    find_gitdir,
    git_env,
    neutralise,
    run_git,
)
from sagas.destinations.slugs import check_key, contained_path, slugify

if TYPE_CHECKING:
    from orchestrator.core.config import Settings

KEY_TRAILER = "Pressroom-Idempotency-Key"
COMPENSATES_TRAILER = "Pressroom-Compensates"
PATH_TRAILER = "Pressroom-Path"
APPROVER_TRAILER = "Pressroom-Approved-By"
LOCK_NAME = "pressroom.lock"


@dataclass(frozen=True)
class _Found:
    commit: str
    subject: str
    path: str
    compensated: bool


def _one_line(text: str) -> str:
    return " ".join(text.split())


class GitDestination:
    """A `Destination` committing pages into one local git repository."""

    form: ClassVar[str] = "git:PATH"
    file_based: ClassVar[bool] = True
    reversible: ClassVar[bool] = True
    test_only: ClassVar[bool] = False

    def __init__(self, repo: Path | str, *, uri: str | None = None, timeout: float = 10.0) -> None:
        self.repo = Path(repo).expanduser()
        self.uri = uri or f"git:{repo}"
        self.timeout = timeout
        self._env: dict[str, str] | None = None  # pinned to the checked git directory
        self._options: tuple[str, ...] = ()  # this operation's overrides for the repository's drivers

    @classmethod
    def check_target(cls, target: str) -> None:
        if not target.strip() or "\0" in target:
            raise InvalidInput("git: needs a repository path, as in git:PATH", target=target)

    @classmethod
    def canonical(cls, target: str) -> str:
        return target

    @classmethod
    def check_at_submit(cls, target: str, settings: Settings) -> None:
        """Nothing beyond the roots, which the caller checks for every file-based kind."""

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float, options: OpenOptions) -> GitDestination:
        cls.check_target(target)
        return cls(target, uri=uri, timeout=timeout)

    # -- the port -----------------------------------------------------------

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        check_key(key)
        relpath = f"{slugify(version.slug or version.title)}.md"
        try:
            gitdir = self._ensure_repo()
        except (GitFailed, OSError) as exc:
            raise NotApplied(f"{self.uri}: cannot use {self.repo} as a repository: {exc}", key=key) from exc
        with exclusive_lock(gitdir / LOCK_NAME):
            try:
                self._begin(gitdir)
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
                self._commit(message, "--", relpath)
            except GitFailed as exc:
                commit_error = exc
            found = self._settle(key, commit_error)
            if found is not None and not found.compensated:
                return self._receipt(key, found)
            if commit_error is None:  # the trailer did not land, though nothing may rewrite it
                raise MaybeApplied(f"{self.uri}: commit succeeded but carries no key {key}", key=key)
            self._discard(relpath)
            raise NotApplied(f"{self.uri}: commit of {key} failed: {commit_error}", key=key)

    def status(self, key: str) -> StatusAnswer:
        check_key(key)
        try:
            gitdir = find_gitdir(self.repo)
            if gitdir is None:
                return StatusAnswer(kind="absent", detail="no repository yet")
            self._begin(gitdir)
            found = self._find(key)
        except (GitFailed, OSError) as exc:
            return StatusAnswer(kind="unknown", detail=str(exc))
        if found is None or found.compensated:
            return StatusAnswer(kind="absent")
        return StatusAnswer(kind="applied", receipt=self._receipt(key, found))

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        check_key(key)
        try:
            gitdir = find_gitdir(self.repo)
        except (GitFailed, OSError) as exc:
            raise NotApplied(f"{self.uri}: cannot compensate {key}: {exc}", key=key) from exc
        if gitdir is None:
            return
        with exclusive_lock(gitdir / LOCK_NAME):
            try:
                self._begin(gitdir)
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
                self._commit(message)
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

    def _begin(self, gitdir: Path) -> None:
        """Pin git to `gitdir` and this folder, and read which drivers the repository names now
        (listing config runs nothing); every later command of this operation overrides them."""
        self._env = git_env(gitdir, self.repo.resolve())
        self._options = ()
        self._options = neutralise(self._git("config", "--name-only", "--list"))

    def _git(self, *args: str, stdin: str | None = None) -> str:
        if self._env is None:
            raise GitFailed("no repository checked yet")
        return run_git(
            args, cwd=self.repo, env=self._env, timeout=self.timeout, options=self._options, stdin=stdin
        )

    def _commit(self, message: str, *paths: str) -> None:
        self._git(
            "commit", "-q", "--no-verify", "--no-gpg-sign", "--allow-empty", "-F", "-", *paths, stdin=message
        )

    def _ok(self, *args: str) -> bool:
        try:
            self._git(*args)
        except GitFailed:
            return False
        return True

    def _ensure_repo(self) -> Path:
        """Make PATH a repository if it is not one; its checked git directory."""
        if self.repo.exists() and not self.repo.is_dir():
            raise GitFailed(f"{self.repo} exists and is not a folder")
        self.repo.mkdir(parents=True, exist_ok=True)
        gitdir = find_gitdir(self.repo)
        if gitdir is None:
            create_repository(self.repo, timeout=self.timeout)
            gitdir = find_gitdir(self.repo)
        if gitdir is None:
            raise GitFailed(f"{self.repo}: git init left no .git")
        return gitdir

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
        out = self._git(
            "log",
            "--no-show-signature",
            "--no-ext-diff",
            "--no-textconv",
            "-F",
            f"--grep={key}",
            f"--format={fields}%x1e",
            "HEAD",
        )
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


__all__ = [
    "COMPENSATES_TRAILER",
    "IDENTITY",
    "KEY_TRAILER",
    "GitDestination",
    "GitFailed",
    "UnsafeRepository",
]

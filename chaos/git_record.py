"""The `git:` destination's own record of what it applied and undid: its history.

Each publish commit carries the trailers `Pressroom-Idempotency-Key`,
`Pressroom-Saga` and `Pressroom-Version-Digest`; each compensation (a revert)
carries `Pressroom-Compensates` (sagas/destinations/git.py). `read` runs
`git log --reverse` on the repository, with no system or global config, and
`parse` turns its output into commits, oldest first; `replay` gives the
effects in that order (`apply` per publish commit, `undo` per compensation)
and what is live at the end: the keys whose newest commit is a publish.
`parse` and `replay` are pure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from chaos.checker import Effect
from sagas.destinations.git import COMPENSATES_TRAILER, KEY_TRAILER

SAGA_TRAILER = "Pressroom-Saga"
DIGEST_TRAILER = "Pressroom-Version-Digest"
TRAILERS = (KEY_TRAILER, COMPENSATES_TRAILER, SAGA_TRAILER, DIGEST_TRAILER)
FORMAT = "%x1f".join(["%H"] + [f"%(trailers:key={name},valueonly)" for name in TRAILERS]) + "%x1e"


@dataclass(frozen=True)
class Commit:
    sha: str
    keys: tuple[str, ...]  # published under these keys
    compensates: tuple[str, ...]  # undoes these keys
    saga_id: str | None
    digest: str | None


def _first(values: str) -> str | None:
    words = values.split()
    return words[0] if words else None


def parse(text: str) -> list[Commit]:
    """Commits from `git log --format=FORMAT` output, in the order given."""
    out: list[Commit] = []
    for record in text.split("\x1e"):
        parts = record.strip("\n").split("\x1f")
        if len(parts) != 1 + len(TRAILERS):
            continue
        sha, keys, compensates, saga, digest = parts
        out.append(
            Commit(
                sha=sha.strip(),
                keys=tuple(keys.split()),
                compensates=tuple(compensates.split()),
                saga_id=_first(saga),
                digest=_first(digest),
            )
        )
    return out


def replay(uri: str, commits: list[Commit]) -> tuple[tuple[Effect, ...], dict[str, str | None]]:
    """(effects oldest first, key -> digest of what is live after the last commit)."""
    effects: list[Effect] = []
    live: dict[str, str | None] = {}
    for c in commits:
        for key in c.compensates:
            effects.append(Effect(uri, "undo", key))
            live.pop(key, None)
        for key in c.keys:
            effects.append(Effect(uri, "apply", key, c.saga_id, c.digest))
            live[key] = c.digest
    return tuple(effects), live


def read(repo: Path, *, timeout: float = 60) -> list[Commit]:
    """The repository's commits, oldest first; none while it has no commit (or no `.git`)."""
    if not (repo / ".git").exists():
        return []
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_DIR": str(repo / ".git"),
        "HOME": str(repo),
    }
    run = subprocess.run(
        [shutil.which("git") or "git", "--no-pager", "log", "--reverse", f"--format={FORMAT}", "HEAD"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if run.returncode != 0:
        if "does not have any commits" in run.stderr or "unknown revision" in run.stderr:
            return []
        raise RuntimeError(f"git log in {repo}: exit {run.returncode}: {run.stderr.strip()[:300]}")
    return parse(run.stdout)


__all__ = ["FORMAT", "Commit", "parse", "read", "replay"]

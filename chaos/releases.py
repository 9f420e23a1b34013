"""The two releases of a rolling upgrade: REF's code in a temporary worktree, and starting
a command or a process with one release's code.

Both releases run on this interpreter's venv. A process is `python -c LAUNCH ARGS` with
PYTHONPATH set to its release's tree, which Python searches before the editable install:
LAUNCH prints the folder its `orchestrator` package came from (`pressroom code: PATH`),
then runs the CLI, so each process's log says which code it ran.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from chaos.cluster import Supervisor
from chaos.run import wait_for_api
from chaos.upgrade_report import PROOF, code_root, last_start

NEW_ROOT = Path(__file__).resolve().parent.parent
VERSIONS = Path("orchestrator") / "store" / "migrations" / "versions"
LAUNCH = (
    "import os, sys, orchestrator; "
    f"print({PROOF!r} + os.path.dirname(orchestrator.__path__[0]), file=sys.stderr, flush=True); "
    "from orchestrator.entrypoints.cli import run; run()"
)
READY = {"relay": "relay running", "worker": " ready."}
QUIET_START = 5.0  # a process without a ready line counts as running after this long up


class SetupError(Exception):
    """The upgrade cannot be carried out: a bad REF, or a release whose processes do not start."""


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(NEW_ROOT), *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SetupError(f"git {' '.join(args)}: {(done.stderr.strip().splitlines() or ['failed'])[-1]}")
    return done.stdout.strip()


@contextlib.contextmanager
def old_tree(ref: str) -> Iterator[tuple[str, Path]]:
    """REF checked out, detached, in a temporary folder: (commit, folder)."""
    try:
        commit = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except SetupError:
        raise SetupError(f"{ref} is not a commit of {NEW_ROOT}") from None
    folder = Path(tempfile.mkdtemp(prefix="pressroom-upgrade-from-"))
    folder.rmdir()
    git("worktree", "add", "--detach", str(folder), commit)
    try:
        yield commit, folder
    finally:
        with contextlib.suppress(SetupError):
            git("worktree", "remove", "--force", str(folder))
        git("worktree", "prune")


def release_env(base: dict[str, str], root: Path) -> dict[str, str]:
    return {**base, "PYTHONPATH": str(root)}


def pressroom(env: dict[str, str], cwd: Path, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """(exit, stdout, last stderr line that is not the code line) of one command."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", LAUNCH, *args],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return -1, "", f"timed out after {timeout:.0f}s"
    said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith(PROOF)]
    return done.returncode, done.stdout.strip(), said[-1] if said else ""


def outcome(code: int, out: str, err: str) -> str:
    return f"exit {code}: {out if code == 0 else err}"[:300]


def wait_running(sup: Supervisor, name: str, api: str, logs: Path, timeout: float = 90) -> float:
    """Seconds until the process's latest start says it runs; SetupError if it never does."""
    began, starts = time.monotonic(), sup.procs[name].starts
    kind = name.split("-", 1)[0]
    while time.monotonic() - began < timeout:
        segment = last_start((logs / f"{name}.log").read_text(errors="replace"))
        up = code_root(segment) is not None
        if kind == "serve" and up:
            wait_for_api(api, timeout=max(1.0, timeout - (time.monotonic() - began)))
            return time.monotonic() - began
        if up and (READY.get(kind, "\0") in segment or time.monotonic() - began >= QUIET_START):
            return time.monotonic() - began
        if sup.procs[name].starts > starts + 2:
            break
        time.sleep(0.2)
    tail = last_start((logs / f"{name}.log").read_text(errors="replace")).strip().splitlines()[-1:]
    raise SetupError(f"{name} did not start: {tail[0] if tail else 'no output'}")


def proofs(sup: Supervisor, logs: Path) -> dict[str, str | None]:
    return {
        name: code_root(last_start((logs / f"{name}.log").read_text(errors="replace"))) for name in sup.procs
    }


__all__ = [
    "LAUNCH",
    "NEW_ROOT",
    "VERSIONS",
    "SetupError",
    "old_tree",
    "outcome",
    "pressroom",
    "proofs",
    "release_env",
    "wait_running",
]

"""The quick and the full read path of `status` and `show`, side by side (the
`tests/e2e/test_read_paths*.py` files).

The same database, the same command, run twice through the console script:
once as is (the quick path: `orchestrator.entrypoints.fast_reads`), once with
one more setting that only `Settings()` may judge (`PRESSROOM_MAX_ATTEMPTS`,
at its default), which sends the command down the full path. `same` asserts
that stdout, stderr and the exit code are byte-for-byte equal.

The sagas and people the reads need are made in the test's own process
(`tests.support.in_process`): the reads are what go through the console script.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import PRESSROOM, SAMPLE_CORPUS, base_env
from tests.e2e.test_paging_and_requests import seed_sagas
from tests.support import in_process

FULL = {"PRESSROOM_MAX_ATTEMPTS": "5"}  # a setting the quick path leaves to Settings()


class Db:
    """A SQLite database in `root` and the console script run on it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"sqlite:///{root / 'pressroom.db'}"
        self.ids: dict[str, str] = {}

    def env(self, **extra: str) -> dict[str, str]:
        return base_env(PRESSROOM_DATABASE_URL=self.url, PRESSROOM_BROKER_URL="inline://", **extra)

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PRESSROOM, *args],
            env=self.env(**extra),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=180,
        )

    def json(self, *args: str) -> dict[str, Any]:
        done = self.run(*args, "--json")
        assert done.returncode == 0, f"{args}: {done.stderr}"
        out: dict[str, Any] = json.loads(done.stdout)
        return out


def submit(db: Db, name: str, *, token: str | None = None) -> str:
    """A saga to a site and a git repository of its own, submitted by sam (open mode) or by
    the holder of `token`; its id."""
    return in_process.submit(
        db.env(),
        db.root,
        brief=f"the library network ({name})",
        corpus=SAMPLE_CORPUS,
        destinations=[f"site:{db.root / ('site-' + name)}", f"git:{db.root / ('repo-' + name)}"],
        token=token,
        actor=None if token else "sam",
    )


def seeded(root: Path) -> Db:
    """Eight sagas: five seeded rows (two pairs share a creation time: the cursor's
    tie-break), one waiting for review, one published, one cancelled."""
    made = Db(root)
    seed_sagas(made.url, 5)
    made.ids["waiting"] = submit(made, "waiting")
    made.ids["published"] = submit(made, "published")
    approved = in_process.approve(made.env(), made.root, made.ids["published"], version=1, actor="rita")
    assert approved["state"] == "succeeded", approved
    made.ids["cancelled"] = submit(made, "cancelled")
    made.json("cancel", made.ids["cancelled"], "--as", "olga")
    return made


def same(db: Db, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """`args` on the quick path and on the full path: the same answer, byte for byte."""
    quick = db.run(*args, **extra)
    full = db.run(*args, **extra, **FULL)
    assert (quick.returncode, quick.stdout, quick.stderr) == (full.returncode, full.stdout, full.stderr), args
    return quick

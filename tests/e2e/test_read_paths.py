"""`status` and `show` of one saga answer the same on the quick SQLite path and on the
store's full path (`tests.support.read_paths`): the JSON, the piped human form, the
pipeline's roles and the usage. `tests/e2e/test_read_paths_lists.py` has the pages and
the errors, `tests/e2e/test_read_paths_access.py` closed mode,
`tests/e2e/test_read_paths_databases.py` the databases the quick path leaves to the full
one; `tests/e2e/test_cli_start.py` checks that the quick path really runs without
SQLAlchemy.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PRESSROOM
from tests.support.pipelines import ROUND, SEEDED_USAGE, seed_progress
from tests.support.read_paths import FULL, Db, same, seeded, submit

# Every check runs the full path's cold start again (seconds each on a busy machine).
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Db:
    return seeded(tmp_path_factory.mktemp("reads"))


def test_one_saga_reads_the_same(db: Db) -> None:
    for key in ("waiting", "published", "cancelled"):
        sid = db.ids[key]
        for args in (
            ["status", sid, "--json"],
            ["status", sid],
            ["status", sid[:8], "--json"],
            ["show", sid, "--json"],
            ["show", sid],
            ["show", sid, "--version", "1", "--json"],
        ):
            assert same(db, *args).returncode == 0
    published = json.loads(same(db, "status", db.ids["published"], "--json").stdout)
    assert published["state"] == "succeeded" and published["approval"] is not None
    assert all(d["receipt"] for d in published["destinations"])
    cancelled = json.loads(same(db, "status", db.ids["cancelled"], "--json").stdout)
    assert {d["state"] for d in cancelled["destinations"]} == {"cancelled"}


def test_the_pipeline_its_roles_and_the_usage_read_the_same(tmp_path: Path) -> None:
    """The quick path reads `role_runs` and `model_calls` itself (no SQLAlchemy loaded) and
    answers as the full path does: the latest run of each role, the verdict, the usage."""
    db = Db(tmp_path)
    sid = submit(db, "pipeline")
    with sqlite3.connect(db.root / "pressroom.db") as conn:
        seed_progress(conn, sid)
    for args in (["status", sid], ["show", sid, "--json"]):
        same(db, *args)
    quick = subprocess.run(
        [sys.executable, "-X", "importtime", PRESSROOM, "status", sid, "--json"],
        env=db.env(),
        cwd=db.root,
        capture_output=True,
        text=True,
        timeout=180,
    )
    loaded = {line.rsplit("|", 1)[1].strip() for line in quick.stderr.splitlines() if "|" in line}
    assert "orchestrator.reads.sqlite_reads" in loaded and "sqlalchemy" not in loaded  # it did not fall back
    full = db.run("status", sid, "--json", **FULL)
    assert (quick.returncode, quick.stdout) == (full.returncode, full.stdout) == (0, full.stdout)
    out = json.loads(quick.stdout)
    assert out["pipeline"] == "default" and out["usage"] == SEEDED_USAGE
    roles = {r["name"]: r for r in out["roles"]}
    assert [r["name"] for r in out["roles"]] == ["researcher", "writer", "reviewer"]
    assert (roles["reviewer"]["state"], roles["reviewer"]["verdict"], roles["reviewer"]["round"]) == (
        "failed",
        "fail",
        ROUND,
    )
    assert roles["writer"]["usage"] == {
        "model_calls": 2,
        "tokens_in": 1500,
        "tokens_out": 300,
        "cost_usd": 0.1875,
    }

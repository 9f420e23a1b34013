"""`status` and `show` answer the same on the quick SQLite path and on the store's full path.

The same database, the same command, run twice through the console script:
once as is (the quick path: `orchestrator.entrypoints.fast_reads`), once with
one more setting that only `Settings()` may judge (`PRESSROOM_MAX_ATTEMPTS`,
at its default), which sends the command down the full path. Stdout, stderr
and the exit code must be byte-for-byte equal: the JSON, the piped human
form, the errors. `tests/e2e/test_cli_start.py` checks that the quick path
really runs without SQLAlchemy.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PRESSROOM, SAMPLE_CORPUS, base_env
from tests.e2e.test_paging_and_requests import seed_sagas
from tests.support.pipelines import ROUND, SEEDED_USAGE, seed_progress

FULL = {"PRESSROOM_MAX_ATTEMPTS": "5"}  # a setting the quick path leaves to Settings()
# Every check runs the full path's cold start again (seconds each on a busy machine).
pytestmark = pytest.mark.timeout(900)


class Db:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"sqlite:///{root / 'pressroom.db'}"
        self.ids: dict[str, str] = {}
        self.token = ""

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


def _submit(db: Db, name: str) -> str:
    dest = f"site:{db.root / ('site-' + name)}"
    out = db.json(
        "submit",
        "--brief",
        f"the library network ({name})",
        "--corpus",
        str(SAMPLE_CORPUS),
        "--dest",
        dest,
        "--dest",
        f"git:{db.root / ('repo-' + name)}",
        "--as",
        "sam",
    )
    return str(out["saga_id"])


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Db:
    made = Db(tmp_path_factory.mktemp("reads"))
    seed_sagas(made.url, 5)  # two pairs share a creation time: the cursor's tie-break
    made.ids["waiting"] = _submit(made, "waiting")
    made.ids["published"] = _submit(made, "published")
    made.json("approve", made.ids["published"], "--version", "1", "--as", "rita")
    made.ids["cancelled"] = _submit(made, "cancelled")
    made.json("cancel", made.ids["cancelled"], "--as", "olga")
    return made


def _same(db: Db, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    quick = db.run(*args, **extra)
    full = db.run(*args, **extra, **FULL)
    assert (quick.returncode, quick.stdout, quick.stderr) == (full.returncode, full.stdout, full.stderr), args
    return quick


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
            assert _same(db, *args).returncode == 0
    published = json.loads(_same(db, "status", db.ids["published"], "--json").stdout)
    assert published["state"] == "succeeded" and published["approval"] is not None
    assert all(d["receipt"] for d in published["destinations"])
    cancelled = json.loads(_same(db, "status", db.ids["cancelled"], "--json").stdout)
    assert {d["state"] for d in cancelled["destinations"]} == {"cancelled"}


def test_pages_and_the_waiting_list_read_the_same(db: Db) -> None:
    assert len(json.loads(_same(db, "status", "--json").stdout)["sagas"]) == 8
    _same(db, "status")
    after = None
    seen: list[str] = []
    while True:
        page = json.loads(
            _same(db, "status", "--limit", "2", "--json", *(["--after", after] if after else [])).stdout
        )
        seen += [s["saga_id"] for s in page["sagas"]]
        after = page["next"]
        if not after:
            break
    assert len(seen) == len(set(seen)) == 8
    waiting = json.loads(_same(db, "status", "--waiting", "--json").stdout)
    assert [s["saga_id"] for s in waiting["sagas"]] == [db.ids["waiting"]]
    none = json.loads(_same(db, "status", "--waiting", "--json", PRESSROOM_REVIEW_REMINDER="3650d").stdout)
    assert none["sagas"] == []


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["status", "--limit", "0", "--json"], 2),
        (["status", "--after", "not-a-cursor", "--json"], 2),
        (["status", "SAGA", "--limit", "1"], 2),
        (["status", "deadbeefdeadbeef", "--json"], 3),
        (["status", "x" * 65], 2),
        (["show", "SAGA", "--version", "9", "--json"], 3),
        (["show", "nosuchsaga"], 3),
    ],
)
def test_errors_read_the_same(db: Db, args: list[str], code: int) -> None:
    args = [db.ids["waiting"] if a == "SAGA" else a for a in args]
    assert _same(db, *args).returncode == code


def test_closed_mode_is_as_strict_on_both_paths(tmp_path: Path) -> None:
    db = Db(tmp_path)
    sid = _submit(db, "closed")
    admin = db.json("users", "add", "ada", "--role", "admin", "--role", "reviewer")["token"]
    done = db.run("users", "add", "rex", "--role", "reviewer", "--json", PRESSROOM_TOKEN=admin)
    assert done.returncode == 0, done.stderr
    reader = json.loads(done.stdout)["token"]
    for args in (["status", "--json"], ["status", sid, "--json"], ["show", sid, "--json"]):
        assert _same(db, *args).returncode == 4  # no token
        assert _same(db, *args, PRESSROOM_TOKEN="pr_" + "x" * 43).returncode == 4  # unknown
        assert _same(db, *args, PRESSROOM_TOKEN=reader).returncode == 0
        assert _same(db, *args, PRESSROOM_TOKEN=f"  {reader} ").returncode == 0  # stripped, as before
    assert db.run("users", "revoke", "rex", PRESSROOM_TOKEN=admin).returncode == 0
    for args in (["status", "--json"], ["show", sid]):
        assert _same(db, *args, PRESSROOM_TOKEN=reader).returncode == 4  # revoked
    # A token whose hash is stored but whose user row is inactive is refused by the quick path too.
    with sqlite3.connect(tmp_path / "pressroom.db") as conn:
        conn.execute("UPDATE users SET active = 0 WHERE name = 'ada'")
    assert _same(db, "status", "--json", PRESSROOM_TOKEN=admin).returncode == 4


def test_a_database_below_the_head_migration_is_left_to_the_full_path(tmp_path: Path) -> None:
    from alembic import command
    from sqlalchemy import create_engine

    from orchestrator.store.schema import alembic_config, head_revision

    db = Db(tmp_path)
    engine = create_engine(db.url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0002")
    engine.dispose()
    done = db.run("status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sagas"] == []
    with sqlite3.connect(tmp_path / "pressroom.db") as conn:  # the full path upgraded it on first use
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]


def test_a_missing_database_is_made_by_the_full_path(tmp_path: Path) -> None:
    db = Db(tmp_path)
    assert json.loads(_same(db, "status", "--json").stdout)["sagas"] == []
    assert (tmp_path / "pressroom.db").is_file()


def test_the_pipeline_its_roles_and_the_usage_read_the_same(db: Db) -> None:
    """The quick path reads `role_runs` and `model_calls` itself (no SQLAlchemy loaded) and
    answers as the full path does: the latest run of each role, the verdict, the usage."""
    sid = db.ids["waiting"]
    with sqlite3.connect(db.root / "pressroom.db") as conn:
        seed_progress(conn, sid)
    for args in (["status", sid], ["show", sid, "--json"]):
        _same(db, *args)
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

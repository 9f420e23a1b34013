"""The CLI imports only what a command uses: `--help` loads no database, broker or tracing SDK;
`status` and `show` on a SQLite database at the head migration load no SQLAlchemy, pydantic or rich."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import PRESSROOM, SAMPLE_CORPUS, base_env
from tests.support import in_process

HEAVY = ("sqlalchemy", "sqlmodel", "celery", "kombu", "opentelemetry.sdk", "psycopg")


def _imported(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", PRESSROOM, *args],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert names, "no import timings read"
    return names


@pytest.mark.parametrize("args", [["--help"], ["status", "--help"], ["approve", "--help"]])
def test_help_imports_no_heavy_stack(args: list[str]) -> None:
    names = _imported(*args)
    loaded = sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))
    assert loaded == [], f"pressroom {' '.join(args)} imported {loaded[:8]}"
    assert "click" in names  # the timings were read from the real entry point


def test_a_read_loads_no_broker_tracing_sdk_or_http_stack(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", PRESSROOM, "status"],
        env=base_env(PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'p.db'}", OTEL_TRACES_EXPORTER="none"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    }
    unneeded = ("celery", "kombu", "opentelemetry.sdk", "httpx", "jinja2", "markdown_it")
    loaded = sorted(n for n in names if any(n == u or n.startswith(u + ".") for u in unneeded))
    assert loaded == [], f"pressroom status imported {loaded[:8]}"
    assert "sqlalchemy" in names  # a new database: the full path made it


def test_status_and_show_on_sqlite_load_no_store_settings_or_rich(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = base_env(PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'p.db'}", PRESSROOM_BROKER_URL="inline://")
    made = subprocess.run(
        [
            PRESSROOM,
            "submit",
            "--brief",
            "the library network",
            "--corpus",
            str(SAMPLE_CORPUS),
            "--dest",
            f"site:{tmp_path / 'site'}",
            "--as",
            "sam",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    saga_id = json.loads(made.stdout)["saga_id"]
    heavy = ("sqlalchemy", "sqlmodel", "pydantic", "pydantic_settings", "rich", "alembic", *HEAVY)
    for args in (
        ["status"],
        ["status", "--json"],
        ["status", saga_id],
        ["show", saga_id],
        ["show", saga_id, "--json"],
    ):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", PRESSROOM, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        names = {
            line.rsplit("|", 1)[1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:")
        }
        loaded = sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in heavy))
        assert loaded == [], f"pressroom {' '.join(args)} imported {loaded[:8]}"
        assert "sqlite3" in names and done.stdout.strip()  # it read the file itself


def _said(stderr: str) -> str:
    """Stderr without the import timings."""
    return "".join(line + "\n" for line in stderr.splitlines() if not line.startswith("import time:"))


def _names(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_postgres_closed_mode_reads_load_no_store_and_answer_as_the_full_path(tmp_path, pg_url) -> None:  # type: ignore[no-untyped-def]
    """`status` and `show` on PostgreSQL in closed mode: psycopg alone (`orchestrator/reads/pg_reads.py`),
    the same bytes and exit code as the store's full path; `approve` loads no Alembic."""
    env = base_env(PRESSROOM_DATABASE_URL=pg_url, PRESSROOM_BROKER_URL="inline://")

    def run(*args: str, token: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
        full = {**env, **({"PRESSROOM_TOKEN": token} if token else {}), **extra}
        return subprocess.run(
            [sys.executable, "-X", "importtime", PRESSROOM, *args],
            env=full,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )

    # The people and the saga are made in this process: what is measured below is the reads.
    others = {"dana": ["author"], "erin": ["reviewer"]}
    tokens = in_process.add_people(env, tmp_path, others, admin_roles=("admin", "author", "reviewer"))
    reviewer = tokens["erin"]
    dests = [f"site:{tmp_path / 'site'}"]
    saga_id = in_process.submit(
        env,
        tmp_path,
        brief="the library network",
        corpus=SAMPLE_CORPUS,
        destinations=dests,
        token=tokens["dana"],
    )
    heavy = ("sqlalchemy", "sqlmodel", "pydantic", "pydantic_settings", "rich", "alembic", "celery", "kombu")
    for args, token in (
        (["status", saga_id], reviewer),
        (["status", saga_id, "--json"], reviewer),
        (["status", "--json"], reviewer),
        (["show", saga_id], reviewer),
        (["show", saga_id, "--json"], reviewer),
        (["status", saga_id], "pr_not-a-token"),  # refused: the full path words it
        (["show", saga_id, "--version", "7"], reviewer),  # not found: the full path words it
    ):
        quick = run(*args, token=token)
        full = run(*args, token=token, PRESSROOM_MAX_ATTEMPTS="5")
        assert (quick.returncode, quick.stdout, _said(quick.stderr)) == (
            full.returncode,
            full.stdout,
            _said(full.stderr),
        ), args
        loaded = sorted(
            n for n in _names(quick.stderr) if any(n == h or n.startswith(h + ".") for h in heavy)
        )
        if quick.returncode == 0:
            assert loaded == [], f"pressroom {' '.join(args)} imported {loaded[:8]}"
            assert "psycopg" in _names(quick.stderr) and quick.stdout.strip()
            assert "sqlalchemy" in _names(full.stderr)  # the full path did run the store
        else:
            assert quick.returncode in (3, 4) and "sqlalchemy" in _names(quick.stderr)
    approved = run("approve", saga_id, "--version", "1", token=reviewer)
    assert approved.returncode == 0, approved.stderr[-2000:]
    assert not any(n == "alembic" or n.startswith("alembic.") for n in _names(approved.stderr))

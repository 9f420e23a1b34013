"""The CLI imports only what a command uses: `--help` loads no database, broker or tracing SDK;
`status` and `show` on a SQLite database at the head migration load no SQLAlchemy, pydantic or rich."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import PRESSROOM, SAMPLE_CORPUS, base_env

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

"""The CLI imports only what a command uses: `--help` loads no database, broker or tracing SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import PRESSROOM, base_env

HEAVY = ("sqlalchemy", "sqlmodel", "celery", "kombu", "opentelemetry.sdk", "psycopg")


def _imported(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", PRESSROOM, *args],
        env=base_env(), capture_output=True, text=True, timeout=60,
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

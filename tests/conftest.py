"""Shared fixtures: tier markers by folder, real services, a CLI runner.

Integration and e2e tests use real PostgreSQL and Redis. They take
`PRESSROOM_TEST_DATABASE_URL` / `PRESSROOM_TEST_REDIS_URL` when set, else
the local defaults; an unreachable service skips the test with the reason,
unless `PRESSROOM_REQUIRE_SERVICES=1` (set by .ci/run), which fails instead.

The suite may run in parallel (`make test` runs `pytest -n $(PYTEST_WORKERS)
--dist loadfile -m "not serial"`: each test file on one worker, in its usual
order; then the `serial` tests alone, see SERIAL_HELPERS). Workers share nothing
that a test changes: PostgreSQL databases have random names, ports are free
ones, temp folders are per worker, and each worker has its own Redis
database (see `redis_url`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = ROOT / "roles" / "sample_corpus"
PRESSROOM = str(Path(sys.executable).parent / "pressroom")
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DEFAULT_AMQP = "amqp://guest:guest@127.0.0.1:5672//"
# The suite's webhook receivers listen on 127.0.0.1, a loopback address no webhook may
# reach unless PRESSROOM_WEBHOOK_ALLOW names it: every Settings built in a test process,
# and every process `base_env` starts, allow it. Tests of the refusal set their own.
TEST_WEBHOOK_ALLOW = "127.0.0.1"
os.environ["PRESSROOM_WEBHOOK_ALLOW"] = TEST_WEBHOOK_ALLOW


# Tests from modules using these helpers start relays and workers with short
# leases, or kill servers: they are marked `serial`, and `make test` runs them
# after the parallel part, one at a time, so no other test competes for the CPU.
# A module named here counts whole (any of its functions, or the module itself);
# of `tests.support.processes`, only what starts such processes counts: a test
# that starts one `pressroom serve` (as `tests.support.web.served` does), runs a
# command or polls a state runs in the parallel part.
SERIAL_HELPERS = ("tests.support.pg_server",)
SERIAL_PROCESS_HELPERS = ("Processes", "redis_server")
PROCESSES = "tests.support.processes"


def _uses_serial_helpers(module: Any) -> bool:
    for value in vars(module).values():
        home = getattr(value, "__module__", None)
        if home in SERIAL_HELPERS or getattr(value, "__name__", None) in (*SERIAL_HELPERS, PROCESSES):
            return True
        if home == PROCESSES and getattr(value, "__qualname__", None) in SERIAL_PROCESS_HELPERS:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    serial: dict[str, bool] = {}
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
        tier = {"unit": "unit", "contracts": "unit", "integration": "integration", "e2e": "e2e"}.get(parts[0])
        if tier:
            item.add_marker(getattr(pytest.mark, tier))
        module = getattr(item, "module", None)
        if module is not None:
            name = module.__name__
            if name not in serial:
                serial[name] = _uses_serial_helpers(module)
            if serial[name]:
                item.add_marker(pytest.mark.serial)


def _unavailable(what: str, why: str) -> None:
    if os.environ.get("PRESSROOM_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{what} is required (PRESSROOM_REQUIRE_SERVICES=1) but unavailable: {why}")
    pytest.skip(f"{what} unavailable: {why}")


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    url = os.environ.get("PRESSROOM_TEST_DATABASE_URL", DEFAULT_PG)
    try:
        import psycopg

        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), connect_timeout=3) as conn:
            conn.execute("select 1")
    except Exception as exc:
        _unavailable("PostgreSQL", str(exc).splitlines()[0])
    return url


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    import psycopg

    name = f"pressroom_t_{uuid.uuid4().hex[:12]}"
    plain = pg_admin_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = pg_admin_url.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    from orchestrator.store import db as store_db

    store_db.dispose_all()
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_base_url() -> str:
    url = os.environ.get("PRESSROOM_TEST_REDIS_URL", DEFAULT_REDIS)
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except Exception as exc:
        _unavailable("Redis", str(exc))
    return url


def redis_db_number() -> int:
    """This test process's Redis database number.

    `PRESSROOM_TEST_REDIS_DB` is one number N (default 7) or a comma list.
    Serially (and on xdist worker gw0) N is used; xdist worker gwK takes the
    K-th entry of a list, else N + K, so parallel workers never share queues.
    """
    chosen = [int(part) for part in os.environ.get("PRESSROOM_TEST_REDIS_DB", "7").split(",") if part.strip()]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    k = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return chosen[k] if k < len(chosen) else chosen[0] + k


@pytest.fixture
def redis_url(redis_base_url: str) -> str:
    """The test Redis database, emptied before the test (queues are per database).

    `PRESSROOM_TEST_REDIS_DB` picks the database (default 7) so that two
    checkouts can run their suites side by side on one Redis; parallel
    workers each take their own (`redis_db_number`).
    """
    import redis

    url = redis_base_url.rsplit("/", 1)[0] + "/" + str(redis_db_number())
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The local RabbitMQ (`PRESSROOM_TEST_AMQP_URL`), checked with a real connection."""
    url = os.environ.get("PRESSROOM_TEST_AMQP_URL", DEFAULT_AMQP)
    try:
        from kombu import Connection

        with Connection(url, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        _unavailable("RabbitMQ", str(exc))
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'pressroom.db'}"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A private copy of the sample corpus (tests may edit it)."""
    dest = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, dest)
    return dest


class Cli:
    """Runs the installed `pressroom` console script with a fixed environment."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PRESSROOM, *args], env=self.env, cwd=self.cwd, capture_output=True, text=True, timeout=timeout
        )

    def json(self, *args: str) -> dict[str, Any]:
        done = self.run(*args, "--json")
        assert done.returncode == 0, f"{args}: exit {done.returncode}: {done.stderr}"
        out: dict[str, Any] = json.loads(done.stdout)
        return out


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRESSROOM_", "OTEL_"))}
    env.update({"PRESSROOM_SECRET": "test-signing-key", "OTEL_TRACES_EXPORTER": "none"})
    env["PRESSROOM_WEBHOOK_ALLOW"] = TEST_WEBHOOK_ALLOW
    env.update(extra)
    return env


@pytest.fixture
def cli(tmp_path: Path, sqlite_url: str) -> Cli:
    return Cli(base_env(PRESSROOM_DATABASE_URL=sqlite_url, PRESSROOM_BROKER_URL="inline://"), tmp_path)

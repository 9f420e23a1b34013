"""The compose file's API health check and the deploy guide's first-user steps, as native processes.

No Docker engine here: `pressroom serve` runs as a process on PostgreSQL, and the
health check is the exact command `docker-compose.yml` gives (its port swapped for
the test's free one, `python` for this interpreter). It must pass in open mode and
after the first user closes it, where an /api route answers 401 without a token.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import PRESSROOM, ROOT, base_env, free_port
from tests.support.processes import Processes, wait_until


def _probe() -> list[str]:
    """The API service's healthcheck argv (after CMD), as the compose file writes it."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    test = compose["services"]["api"]["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python"
    return [str(part) for part in test[1:]]


def _run_probe(argv: list[str], port: int) -> subprocess.CompletedProcess[str]:
    swapped = [part.replace("127.0.0.1:8080/", f"127.0.0.1:{port}/") for part in argv]
    assert swapped != argv, "the probe does not ask 127.0.0.1:8080, where the compose API listens"
    return subprocess.run([sys.executable, *swapped[1:]], capture_output=True, text=True, timeout=30)


def _pressroom(env: dict[str, str], *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    full = {**env, **({"PRESSROOM_TOKEN": token} if token else {})}
    return subprocess.run([PRESSROOM, *args], env=full, capture_output=True, text=True, timeout=120)


class Served:
    def __init__(self, env: dict[str, str], port: int) -> None:
        self.env, self.port = env, port


@pytest.fixture
def served(tmp_path: Path, pg_url: str) -> Iterator[Served]:
    env = base_env(PRESSROOM_DATABASE_URL=pg_url, PRESSROOM_BROKER_URL="inline://")
    port = free_port()
    procs = Processes(env, tmp_path)
    proc = procs.start("serve", PRESSROOM, "serve", "--port", str(port))

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/sign-in", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=60, what="pressroom serve")
        yield Served(env, port)
    finally:
        procs.stop_all()
        print(proc.output()[-2000:])


def test_healthcheck_passes_in_open_and_closed_mode(served: Served) -> None:
    probe = _probe()
    assert _run_probe(probe, served.port).returncode == 0  # open mode

    # The guide's step 3: the first user needs no token and closes the mode.
    added = _pressroom(served.env, "users", "add", "alice", "--role", "admin", "--json")
    assert added.returncode == 0, added.stderr
    token: str = json.loads(added.stdout)["token"]
    anonymous = _pressroom(served.env, "whoami")
    assert anonymous.returncode == 4 and anonymous.stderr.count("\n") == 1, anonymous.stderr
    who: dict[str, Any] = json.loads(_pressroom(served.env, "whoami", "--json", token=token).stdout)
    assert who["mode"] == "closed" and who["user"]["name"] == "alice"

    api = httpx.get(f"http://127.0.0.1:{served.port}/api/sagas", timeout=10)
    assert api.status_code == 401  # what the old probe asked: the container would turn unhealthy
    done = _run_probe(probe, served.port)
    assert done.returncode == 0, done.stderr[-1000:]
    health = httpx.get(f"http://127.0.0.1:{served.port}/healthz", timeout=10)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    # The same probe aimed at an /api route fails once a user exists: the check can fail.
    old = [part.replace("/healthz", "/api/sagas") for part in probe]
    assert _run_probe(old, served.port).returncode != 0

"""The whole pipeline as separate OS processes on Redis + PostgreSQL:
relay and worker processes, driven through the CLI from submit to succeeded."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.conftest import base_env
from tests.support.processes import Processes, cli_json, saga_state, wait_until


@pytest.fixture
def procs(tmp_path: Path, pg_url: str, redis_url: str):  # type: ignore[no-untyped-def]
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS="5",
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
    )
    p = Processes(env, tmp_path)
    yield p
    p.stop_all()


def test_submit_to_succeeded_across_processes(procs: Processes, corpus: Path, tmp_path: Path) -> None:
    procs.relay()
    for queue in ("researcher", "writer", "reviewer", "publisher"):
        procs.worker(f"worker-{queue}", queue)
    site, repo = tmp_path / "site", tmp_path / "repo"
    env = procs.env
    saga = cli_json(env, "submit", "--brief", "history of the library network", "--corpus", str(corpus),
                    "--dest", f"site:{site}", "--dest", f"git:{repo}", "--as", "dana")
    sid = saga["saga_id"]
    try:
        wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=90, what="ready-for-review")
        shown = cli_json(env, "show", sid)
        assert shown["citations"] and shown["review"]["verdict"] == "pass"
        approval = cli_json(env, "approve", sid, "--version", str(shown["version"]), "--as", "erin")
        assert approval["version_digest"] == shown["version_digest"]
        wait_until(lambda: saga_state(env, sid) == "succeeded", timeout=90, what="succeeded")
    except AssertionError:
        print(procs.logs())
        raise
    status = cli_json(env, "status", sid)
    receipts = {d["uri"]: d["receipt"] for d in status["destinations"]}
    page = Path(receipts[f"site:{site}"]["path"])
    assert hashlib.sha256(page.read_bytes()).hexdigest() == status["version_digest"]
    commit = receipts[f"git:{repo}"]["commit"]
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%H %(trailers:key=Pressroom-Idempotency-Key,valueonly)"],
                         capture_output=True, text=True, check=True).stdout
    assert commit in log and status["destinations"][1]["idempotency_key"] in log
    count = subprocess.run(["git", "-C", str(repo), "rev-list", "--count", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert count == "1", "one commit per publish"

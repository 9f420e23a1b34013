"""First publishes to a `git:` repository that does not exist yet, all at once.

The publisher runs many calls concurrently (threads) and several workers
(processes); the first publishes to a new repository must not trip over each
other making it. Each contender publishes its own key: every one succeeds and
lands as exactly one commit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import ROOT, base_env

PROCESSES = 3
THREADS = 4  # per process: 12 contenders in all

# One worker process: waits for the common start time, then publishes THREADS keys at once.
_WORKER = """
import json, sys, threading, time, hashlib
from sagas.destinations.base import PublishedVersion
from sagas.destinations.registry import open_destination

repo, name, start, threads = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
results = {}

def one(n):
    key = f"{name}-k{n}"
    markdown = f"# Page {name} {n}\\n\\nBody {n}.\\n"
    version = PublishedVersion(
        saga_id="s", version=1, version_digest=hashlib.sha256(markdown.encode()).hexdigest(),
        title=f"Page {name} {n}", slug="", markdown=markdown,
    )
    while time.time() < start:
        time.sleep(0.001)
    try:
        results[key] = open_destination(f"git:{repo}", timeout=30).publish(key, version)["commit"]
    except Exception as exc:
        results[key] = f"ERROR {type(exc).__name__}: {exc}"

workers = [threading.Thread(target=one, args=(n,)) for n in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(json.dumps(results))
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_concurrent_first_publishes_from_threads_and_processes_all_land(tmp_path: Path) -> None:
    repo = tmp_path / "fresh" / "repo"  # neither folder exists yet
    start = time.time() + 2.0  # every process is up (imports done) by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(repo), f"p{i}", str(start), str(THREADS)],
            cwd=ROOT,
            env=base_env(PYTHONPATH=str(ROOT)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    results: dict[str, str] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.update(json.loads(out))
    failed = {key: value for key, value in results.items() if value.startswith("ERROR")}
    assert failed == {}
    assert len(results) == PROCESSES * THREADS
    # One commit per key, each the commit its publish reported, on one history.
    assert int(_git(repo, "rev-list", "--count", "HEAD")) == PROCESSES * THREADS
    log = _git(repo, "log", "--format=%H %(trailers:key=Pressroom-Idempotency-Key,valueonly,separator=)")
    by_key = {line.split()[1]: line.split()[0] for line in log.splitlines() if line.strip()}
    assert by_key == results
    assert _git(repo, "status", "--porcelain") == ""


def test_concurrent_first_publishes_from_threads_of_one_process_all_land(tmp_path: Path) -> None:
    from sagas.destinations.registry import open_destination
    from tests.contracts.test_destinations import make_version

    repo = tmp_path / "new-repo"
    barrier = threading.Barrier(8)
    outcomes: dict[int, str] = {}

    def publish(n: int) -> None:
        barrier.wait()
        try:
            done = open_destination(f"git:{repo}", timeout=30).publish(f"k{n}", make_version(f"Page {n}"))
            outcomes[n] = done["commit"]
        except Exception as exc:  # reported below, not swallowed
            outcomes[n] = f"ERROR {exc}"

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [v for v in outcomes.values() if v.startswith("ERROR")] == []
    assert int(_git(repo, "rev-list", "--count", "HEAD")) == 8

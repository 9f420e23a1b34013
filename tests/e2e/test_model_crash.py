"""A role worker killed after its model answered, before the turn committed, asks nothing twice.

Real processes on Redis and PostgreSQL: the scripted chat-completions server as a
process of its own (its counters and request bodies read over HTTP at `/stats`), a
relay and a solo role worker. The research role is on the model; the worker builds
its own index of a corpus of a few hundred files inside the model's first tool call
(`corpus.search`), so once that call's reply is recorded (`model_calls` row
`answered`) the worker is busy for seconds with no request in flight: it is
SIGKILLed there. The lease brings the work back to a second worker, whose turn is
answered from the record for the step already asked, then goes on.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import base_env
from tests.support.model_pipelines import ALL_ON_MODEL, KEY, KEY_VARIABLE, Rows, write_pipelines
from tests.support.processes import Processes, cli_json, saga_state, wait_until

pytestmark = pytest.mark.timeout(600)
BRIEF = "history of the library network"
LEASE = "10"  # long enough for the second worker to index the corpus once


def small_library(root: Path, files: int = 600) -> Path:
    """Enough notes that indexing them takes the worker a few seconds."""
    root.mkdir()
    for i in range(files):
        (root / f"note-{i:04d}.md").write_text(
            f"# Note {i}\n\nThe library network opened branch number {i} in a renovated building. "
            f"Volunteers catalogued {i * 7} books for the reading room that year.\n\n"
            + "Local history records mention the library network often. "
            * 20,
            encoding="utf-8",
        )
    return root


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[list[Processes]]:
    holder: list[Processes] = []
    yield holder
    for p in holder:
        p.stop_all()


def _stats(base: str) -> dict[str, Any]:
    out: dict[str, Any] = httpx.get(f"{base}/stats", params={"bodies": "1"}, timeout=10).json()
    return out


def _asked(body: dict[str, Any]) -> str:
    """What one request asked: its messages and tools (the same step asked again is equal)."""
    return json.dumps([body["messages"], body["tools"]], sort_keys=True)


def test_a_worker_killed_after_the_model_answered_asks_nothing_twice(
    procs: list[Processes], pg_url: str, redis_url: str, tmp_path: Path
) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS=LEASE,
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
        PRESSROOM_INDEX_DIR=str(tmp_path / "worker-index"),
        **{KEY_VARIABLE: KEY},
    )
    p = Processes(env, tmp_path)
    procs.append(p)
    served = p.start("model", sys.executable, "-m", "evaluation.scripted_model", "--script", "faithful",
                     "--port", "0", "--latency", "0")  # fmt: skip
    url = wait_until(
        lambda: next((ln for ln in served.output().splitlines() if ln.startswith("http://")), None),
        timeout=30,
        what="the scripted model's URL",
    )
    base = url.removesuffix("/v1")
    folder = write_pipelines(tmp_path / "pipelines", url, {"modelled": ALL_ON_MODEL})
    corpus = small_library(tmp_path / "library")
    p.relay()
    first = p.worker("worker-1", "researcher,writer,reviewer")
    # The submitter indexes the corpus into a folder of its own (another host, say): the
    # worker's first search builds its own index, after the model's first reply is recorded.
    submitter = {**env, "PRESSROOM_PIPELINES_DIR": str(folder), "PRESSROOM_INDEX_DIR": str(tmp_path / "mine")}
    site = f"site:{tmp_path / 'site'}"
    made = cli_json(submitter, "submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", site,
                    "--as", "sam", "--pipeline", "modelled")  # fmt: skip
    sid = str(made["saga_id"])
    rows = Rows(pg_url)

    def calls() -> list[dict[str, Any]]:
        return rows.all(
            "SELECT key, role, state, seq FROM model_calls WHERE saga_id = :sid ORDER BY seq", sid=sid
        )

    def research_done() -> bool:
        return bool(
            rows.one(
                "SELECT count(*) FROM work WHERE saga_id = :sid AND task LIKE '%research' "
                "AND done_at IS NOT NULL",
                sid=sid,
            )
        )

    try:
        wait_until(
            lambda: any(c["state"] == "answered" for c in calls()),
            timeout=90,
            every=0.05,
            what="the model's first reply to be recorded",
        )
        first.kill(signal.SIGKILL)
        at_kill, stats_at_kill = calls(), _stats(base)
        assert not research_done(), "the kill landed after the research turn committed"
        # The kill landed where it was meant to: a reply recorded, no request in flight.
        assert [(c["role"], c["state"]) for c in at_kill] == [("research", "answered")], at_kill
        assert stats_at_kill["requests"] == 1 and stats_at_kill["in_flight"] == 0, stats_at_kill
        assert saga_state(env, sid) == "preparing"

        p.worker("worker-2", "researcher,writer,reviewer")
        wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=180, what="ready-for-review")
    except AssertionError:
        print(p.logs())
        raise
    stats = _stats(base)
    recorded = calls()
    attempts = rows.one("SELECT attempts FROM work WHERE saga_id = :sid AND task LIKE '%research'", sid=sid)
    events = rows.one("SELECT count(*) FROM events WHERE saga_id = :sid AND kind = 'model'", sid=sid)
    rows.close()

    # Every request the server saw has its one recorded reply: the step answered before the
    # kill was replayed from its record, not asked again.
    assert {c["state"] for c in recorded} == {"answered"}
    assert stats["requests"] == stats["answered"] == len(recorded) == events > 1
    asked = [_asked(body) for body in stats["bodies"]]
    assert len(set(asked)) == len(asked), "a conversation step was asked twice"
    assert recorded[0]["key"] == at_kill[0]["key"] and recorded[0]["seq"] == 1
    goals = [json.loads(body["messages"][1]["content"]) for body in stats["bodies"]]
    opening = [g for g, b in zip(goals, stats["bodies"], strict=True) if len(b["messages"]) == 2]
    assert [g["role_name"] for g in opening] == ["research", "draft", "check"], "each turn opened once"
    assert attempts == 2, "the second attempt came from the lease, after the kill"

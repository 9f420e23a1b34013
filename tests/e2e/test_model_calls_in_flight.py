"""Model calls in flight in a real worker: many at once on few connections, and a kill mid-call.

Real processes on Redis and PostgreSQL: a relay and a role worker, the scripted
chat-completions server on a thread of the test (it counts requests by their
`Idempotency-Key`, which is the call's key in `model_calls`). Sagas are submitted
in this process with no broker, so every one is queued before the worker starts.

- Twenty sagas whose researcher and writer wait on a 1 s model (five calls a saga),
  on a worker of 4 threads whose database pool may open 13 connections and whose
  lease (2 s) is shorter than a research turn: more calls wait at once than the
  worker has threads or connections (its waiting deliveries hold neither), every
  saga reaches ready-for-review, and every call was sent once and recorded once.
- A worker SIGKILLed while its writer waits on the model, after the call's intent
  committed and before its answer did: the lease (no longer renewed) runs out, a
  second worker runs the turn again and asks again under the same key, and the
  call is recorded answered once.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluation.scripted_model import ScriptedModel
from orchestrator.store.db import POOL_OVERFLOW, dispose_all
from tests.conftest import base_env
from tests.integration.helpers import make_app
from tests.support.model_pipelines import KEY, KEY_VARIABLE, Role, Rows, write_pipelines
from tests.support.processes import PRESSROOM, Processes, saga_state, wait_until

BRIEF = "history of the library network"
SAGAS = 20
THREADS = 4
# PRESSROOM_DB_POOL_SIZE, the default for 4 threads: with its overflow of 5, the most connections
# the worker opens (its threads and its waiting loops each hold at most 2 at once).
POOL = 8
LEASE = "2"  # shorter than a research turn on the model (four calls of 1 s): kept alive meanwhile
RESEARCH_AND_DRAFT_ON_MODEL = (
    Role("research", "researcher"),
    Role("draft", "writer", ("research",)),
    Role("check", "reviewer", ("draft",), model=False),
)
DRAFT_ON_MODEL = (
    Role("research", "researcher", model=False),
    Role("draft", "writer", ("research",)),
    Role("check", "reviewer", ("draft",), model=False),
)


@pytest.fixture
def procs() -> Iterator[list[Processes]]:
    held: list[Processes] = []
    yield held
    for p in held:
        p.stop_all()


def _env(pg_url: str, redis_url: str, tmp_path: Path, folder: Path, **extra: str) -> dict[str, str]:
    return base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_PIPELINES_DIR=str(folder),
        PRESSROOM_INDEX_DIR=str(tmp_path / "index"),
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
        **{KEY_VARIABLE: KEY},
        **extra,
    )


def _submit(pg_url: str, tmp_path: Path, folder: Path, corpus: Path, count: int) -> list[str]:
    """`count` sagas of the pipeline `modelled`, queued in the outbox for the relay."""
    app = make_app(
        pg_url,
        tmp_path,
        broker_url="none://",
        pipelines_dir=folder,
        index_dir=tmp_path / "index",
        secret=base_env()["PRESSROOM_SECRET"],  # the workers' key: they verify the handles it signs
    )
    try:
        return [
            str(
                app.submissions.submit(
                    brief=f"{BRIEF} {n}",
                    corpus=str(corpus),
                    destinations=[f"site:{tmp_path / 'site'}"],
                    actor="sam",
                    pipeline="modelled",
                )["saga_id"]
            )
            for n in range(count)
        ]
    finally:
        app.close()
        dispose_all()


def _calls(rows: Rows, where: str = "", **params: Any) -> list[dict[str, Any]]:
    return rows.all(
        f"SELECT key, saga_id, role, state, attempts FROM model_calls {where} ORDER BY seq", **params
    )


def test_many_calls_wait_at_once_on_fewer_connections_and_each_is_sent_once(
    procs: list[Processes], pg_url: str, redis_url: str, tmp_path: Path, corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    with ScriptedModel("faithful", latency=1.0) as model:
        folder = write_pipelines(tmp_path / "pipelines", model.url, {"modelled": RESEARCH_AND_DRAFT_ON_MODEL})
        sids = _submit(pg_url, tmp_path, folder, corpus, SAGAS)
        env = _env(
            pg_url,
            redis_url,
            tmp_path,
            folder,
            PRESSROOM_DB_POOL_SIZE=str(POOL),
            PRESSROOM_LEASE_SECONDS=LEASE,
        )
        p = Processes(env, tmp_path)
        procs.append(p)
        p.relay()
        p.start("worker", PRESSROOM, "worker", "--queues", "researcher,writer,reviewer",
                "--pool", "threads", "--concurrency", str(THREADS), "--loglevel", "INFO")  # fmt: skip
        try:
            wait_until(
                lambda: all(saga_state(env, sid) == "ready-for-review" for sid in sids),
                timeout=120,
                every=0.5,
                what="every saga at ready-for-review",
            )
        except AssertionError:
            print(p.logs())
            raise
        stats = model.stats()
    rows = Rows(pg_url)
    recorded = _calls(rows)
    rows.close()
    # More calls waited at once than the worker has threads, or connections.
    assert stats.peak_in_flight > POOL + POOL_OVERFLOW > THREADS, stats.peak_in_flight
    assert {c["state"] for c in recorded} == {"answered"}
    assert {c["saga_id"] for c in recorded} == set(sids)
    # Each recorded call was sent once, under its own key, and nothing else was sent.
    assert stats.by_idempotency_key == {c["key"]: 1 for c in recorded}
    assert stats.requests == stats.answered == len(recorded)


def test_a_worker_killed_while_its_model_answers_asks_again_under_the_same_key(
    procs: list[Processes], pg_url: str, redis_url: str, tmp_path: Path, corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    with ScriptedModel("faithful", latency=2.0) as model:
        folder = write_pipelines(tmp_path / "pipelines", model.url, {"modelled": DRAFT_ON_MODEL})
        (sid,) = _submit(pg_url, tmp_path, folder, corpus, 1)
        env = _env(pg_url, redis_url, tmp_path, folder, PRESSROOM_LEASE_SECONDS="3")
        p = Processes(env, tmp_path)
        procs.append(p)
        rows = Rows(pg_url)
        p.relay()
        first = p.worker("worker-1", "researcher,writer,reviewer")
        try:
            (intent,) = wait_until(
                lambda: model.stats().in_flight == 1 and _calls(rows, "WHERE state = 'intent'"),
                timeout=60,
                every=0.05,
                what="the writer's call in flight, its intent recorded",
            )
            first.kill(signal.SIGKILL)
            assert model.stats().by_idempotency_key == {intent["key"]: 1}
            assert _calls(rows) == [intent], "the answer of the call in flight was not recorded"
            p.worker("worker-2", "researcher,writer,reviewer")
            wait_until(
                lambda: saga_state(env, sid) == "ready-for-review", timeout=60, what="ready-for-review"
            )
        except AssertionError:
            print(p.logs())
            raise
        stats = model.stats()
    recorded = _calls(rows)
    events = rows.one("SELECT count(*) FROM events WHERE saga_id = :sid AND kind = 'model'", sid=sid)
    attempts = rows.one("SELECT attempts FROM work WHERE saga_id = :sid AND task LIKE '%draft'", sid=sid)
    rows.close()
    # The server saw the call twice, under one key, with the same request; it is recorded once.
    assert stats.by_idempotency_key == {intent["key"]: 2}
    assert stats.requests == 2 and model.requests[0] == model.requests[1]
    assert [(c["key"], c["role"], c["state"]) for c in recorded] == [(intent["key"], "draft", "answered")]
    assert events == 1
    assert attempts == 2, "the second attempt came from the lease, after the kill"

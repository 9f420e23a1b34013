"""Per-profile model limits through the real `openai` client, the app and the scripted model server.

Profile A's endpoint (a local HTTP server in front of a scripted one) answers 429 with
`Retry-After: 30`: A's turn gives its thread back at once, A cools down, and profile B's sagas
reach ready-for-review meanwhile; once the cool-down is over the lease brings A's work back and
it finishes, each answered call sent once. With `concurrency = 2` the server never sees more
than two requests of that profile in flight (a turn running as a worker's waiting delivery waits
for its place instead of deferring), and a recorded reply is replayed without a place.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evaluation.scripted_model import MODEL_NAME, ScriptedModel
from orchestrator.bootstrap import sweep_leases
from orchestrator.core.pipeline import ModelProfile
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import dispose_all
from orchestrator.store.model_calls import StoredModelCalls, usage
from outbox.waits import Waits
from roles import durable_model
from roles.durable_model import DurableChat
from roles.llm_client import ModelUnavailable, chat_for
from roles.model_limits import ModelLimits
from tests.integration.helpers import make_app
from tests.support.model_pipelines import ALL_ON_MODEL, KEY, KEY_VARIABLE, pipeline_toml

BRIEF = "history of the library network"


class Throttling:
    """A chat-completions endpoint that answers its `refuse`-th request (1-based) with 429 and
    `Retry-After: 30` while `refusing`, and passes every other one to `backend`."""

    def __init__(self, backend: str, refuse: int) -> None:
        self.backend, self.refuse, self.refusing = backend, refuse, True
        self.requests = self.refused = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with lock:
                    outer.requests += 1
                    refuse = outer.refusing and outer.requests == outer.refuse
                    outer.refused += refuse
                if refuse:
                    self._send(429, b'{"error": {"message": "slow down", "type": "requests"}}', "30")
                    return
                forwarded = urllib.request.Request(
                    outer.backend + self.path.removeprefix("/v1"),
                    data=body,
                    headers={"content-type": "application/json"},
                )
                with urllib.request.urlopen(forwarded, timeout=30) as answer:
                    self._send(answer.status, answer.read(), None)

            def _send(self, status: int, payload: bytes, retry_after: str | None) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                if retry_after is not None:
                    self.send_header("retry-after", retry_after)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The process's model limits on a clock the test moves."""
    fake = FakeClock()
    monkeypatch.setattr(durable_model, "PROCESS_LIMITS", ModelLimits(clock=fake))
    return fake


def test_a_429_on_one_profile_does_not_delay_another_profiles_sagas(
    tmp_path: Path, corpus: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    folder = tmp_path / "pipelines"
    folder.mkdir()
    with ScriptedModel("faithful", latency=0.0) as model_a, ScriptedModel("faithful", latency=0.0) as model_b:
        throttling = Throttling(model_a.url, refuse=2)  # A's research turn: its second call
        try:
            (folder / "on_a.toml").write_text(pipeline_toml(throttling.url, ALL_ON_MODEL))
            (folder / "on_b.toml").write_text(pipeline_toml(model_b.url, ALL_ON_MODEL))
            app = make_app(
                f"sqlite:///{tmp_path}/db.sqlite", tmp_path, pipelines_dir=folder, lease_seconds=0.5
            )
            try:
                _scenario(app, corpus, tmp_path, clock, throttling, model_a, model_b)
            finally:
                app.close()
                dispose_all()
        finally:
            throttling.close()


def _submit(app: Pressroom, corpus: Path, tmp_path: Path, pipeline: str) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    status = app.submissions.submit(
        brief=BRIEF,
        corpus=str(corpus),
        destinations=[f"site:{tmp_path}/{pipeline}"],
        actor="sam",
        pipeline=pipeline,
    )
    return status, time.monotonic() - started


def _scenario(
    app: Pressroom,
    corpus: Path,
    tmp_path: Path,
    clock: FakeClock,
    throttling: Throttling,
    model_a: ScriptedModel,
    model_b: ScriptedModel,
) -> None:
    on_a, took = _submit(app, corpus, tmp_path, "on_a")
    assert on_a["state"] == "preparing", on_a  # waiting for A, not failed
    assert (throttling.requests, throttling.refused) == (2, 1)  # no retry on the thread
    assert took < 10.0  # the 30 seconds A asked for are not slept on the thread

    on_b, took = _submit(app, corpus, tmp_path, "on_b")
    assert on_b["state"] == "ready-for-review", on_b
    assert took < 10.0
    again_a, _ = _submit(app, corpus, tmp_path, "on_a")  # A is cooling down: nothing is sent
    assert again_a["state"] == "preparing" and throttling.requests == 2
    assert usage(app.engine, on_b["saga_id"])["model_calls"] == model_b.stats().requests > 0

    throttling.refusing = False
    clock.now += 31.0  # A's cool-down is over
    deadline = time.monotonic() + 60
    while {_state(app, on_a), _state(app, again_a)} != {"ready-for-review"}:
        assert time.monotonic() < deadline, (_state(app, on_a), _state(app, again_a))
        time.sleep(0.6)  # the lease (0.5 s) runs out, then the sweeper sends the work again
        sweep_leases(app)
        app.consumer.drain()
    answered = sum(usage(app.engine, s["saga_id"])["model_calls"] for s in (on_a, again_a))
    # Each answered call of A was sent once: the one answered before the 429 was replayed.
    assert answered == model_a.stats().requests == throttling.requests - 1


def _state(app: Pressroom, status: dict[str, Any]) -> str:
    return str(app.reads.status(status["saga_id"])["state"])


PROFILE = ModelProfile(model=MODEL_NAME, seed=7, max_tokens=200, concurrency=2, max_retries=0)


def _messages(n: int) -> list[dict[str, Any]]:
    goal = {"role": "researcher", "role_name": "research", "saga_id": f"saga-{n}", "brief": f"{BRIEF} {n}"}
    return [{"role": "system", "content": "You plan."}, {"role": "user", "content": json.dumps(goal)}]


def _chat(app: Pressroom, profile: ModelProfile, saga_id: str, limits: ModelLimits, role: str) -> DurableChat:
    return DurableChat(
        chat_for(profile),
        StoredModelCalls(app.engine),
        saga_id=saga_id,
        role=role,
        round=0,
        request_id=None,
        profile_name="house",
        profile=profile,
        limits=limits,
        rng=random.Random(7),
    )


@pytest.fixture
def sagas(tmp_path: Path, corpus: Path) -> Iterator[tuple[Pressroom, list[str]]]:
    app = make_app(f"sqlite:///{tmp_path}/db.sqlite", tmp_path, broker_url="none://")
    ids = [
        app.submissions.submit(brief=BRIEF, corpus=str(corpus), destinations=["memory:m"], actor="dana")[
            "saga_id"
        ]
        for _ in range(6)
    ]
    yield app, ids
    app.close()
    dispose_all()


def test_the_server_never_sees_more_than_the_profiles_concurrency(sagas: tuple[Pressroom, list[str]]) -> None:
    app, ids = sagas
    limits = ModelLimits()
    refusals: list[float] = []
    with ScriptedModel("faithful", latency=0.3) as model:
        profile = PROFILE.model_copy(update={"base_url": model.url})

        def turn(n: int) -> None:
            while True:  # as the lease would: the turn again, after its thread was given back
                try:
                    _chat(app, profile, ids[n], limits, "research").complete(_messages(n), [])
                    return
                except ModelUnavailable as exc:
                    assert exc.retry_after is not None and exc.status is None
                    refusals.append(exc.retry_after)
                    time.sleep(0.05)

        threads = [threading.Thread(target=turn, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        stats = model.stats()
    assert stats.requests == stats.answered == 6  # a refused turn sends nothing
    assert stats.peak_in_flight == 2
    assert refusals and limits.in_flight(profile) == 0


def test_a_waiting_delivery_at_its_profiles_limit_waits_for_a_place_instead(
    sagas: tuple[Pressroom, list[str]],
) -> None:
    """As a worker runs it (`outbox.waits`): a turn finding no place holds no thread, so it waits
    for one instead of deferring to its lease, and the profile's limit still holds."""
    app, ids = sagas
    limits = ModelLimits()
    waits = Waits(threads=1, capacity=len(ids))
    outcomes: list[str] = []
    with ScriptedModel("faithful", latency=0.3) as model:
        profile = PROFILE.model_copy(update={"base_url": model.url})

        def turn(n: int) -> None:
            try:
                _chat(app, profile, ids[n], limits, "research").complete(_messages(n), [])
                outcomes.append("answered")
            except ModelUnavailable as exc:
                outcomes.append(f"deferred: {exc}")

        for n in range(len(ids)):
            waits.start(partial(turn, n))
        deadline = time.monotonic() + 30
        while waits.running():
            assert time.monotonic() < deadline, outcomes
            time.sleep(0.05)
        stats = model.stats()
    assert outcomes == ["answered"] * len(ids)
    assert stats.requests == len(ids) and stats.peak_in_flight == PROFILE.concurrency == 2
    assert durable_model.LONGEST_QUEUE == 60.0  # how long it would wait: docs/deploy.md says so


def test_a_recorded_reply_is_replayed_without_a_place(sagas: tuple[Pressroom, list[str]]) -> None:
    app, ids = sagas
    limits = ModelLimits()
    with ScriptedModel("faithful", latency=0.0) as model:
        profile = PROFILE.model_copy(update={"base_url": model.url, "concurrency": 1})
        first = _chat(app, profile, ids[0], limits, "research").complete(_messages(0), [])
        assert limits.take(profile, 1) is None  # the profile's one place is held from now on
        again = _chat(app, profile, ids[0], limits, "research").complete(_messages(0), [])
        assert again == first
        with pytest.raises(ModelUnavailable, match="at its limit"):
            _chat(app, profile, ids[1], limits, "research").complete(_messages(1), [])
        assert model.stats().requests == 1

"""Durable, budgeted model calls on SQLite and PostgreSQL, through the real `openai` client
against the scripted model server (`evaluation.scripted_model`).

A call's intent commits before the request; its reply commits with its tokens, cost, `model`
event and the saga's budget charge; the same request in the same turn is answered from the
record (the server sees one request, not two); an unavailable endpoint is retried, a refusal
is not; a spent role or saga budget refuses the next call before anything is sent; and no
transaction is open while the model answers.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlmodel import Session, select

from evaluation.scripted_model import MODEL_NAME, ScriptedModel
from orchestrator.core.pipeline import Budget, ModelProfile
from orchestrator.harness.budget import BudgetExhausted
from orchestrator.harness.model_calls import CallAnswer, CallIntent, call_key, request_digest
from orchestrator.pressroom import Pressroom
from orchestrator.store.budget import spent
from orchestrator.store.model_calls import StoredModelCalls, calls_of, record_intent, record_reply, usage
from orchestrator.store.tables import EventRow
from roles.durable_model import DurableChat, params_of
from roles.llm_client import ModelRefused, ModelUnavailable, chat_for
from telemetry import names, setup
from tests.conftest import SAMPLE_CORPUS
from tests.integration.helpers import make_app

PROFILE = ModelProfile(
    model=MODEL_NAME, temperature=0.0, seed=7, max_tokens=2000, price_in=0.5, price_out=1.5, max_retries=3
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "corpus_search",
            "description": "Search the saga's corpus.",
            "parameters": {
                "type": "object",
                "properties": {"saga_id": {"type": "string"}, "query": {"type": "string"}},
                "required": ["saga_id"],
            },
        },
    }
]


@pytest.fixture
def app(either_db_url: str, tmp_path: Path) -> Pressroom:
    return make_app(either_db_url, tmp_path, broker_url="none://")


@pytest.fixture
def saga(app: Pressroom) -> str:
    """A submitted saga (nothing runs: no broker), whose events the model calls chain onto."""
    out = app.submissions.submit(
        brief="history of the library network",
        corpus=str(SAMPLE_CORPUS),
        destinations=["memory:m"],
        actor="dana",
    )
    saga_id: str = out["saga_id"]
    return saga_id


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = setup.install_in_memory()
    yield exporter
    setup.shutdown()


def messages(
    saga_id: str, brief: str = "history of the library network", role: str = "draft"
) -> list[dict[str, Any]]:
    goal = {"role": "researcher", "role_name": role, "saga_id": saga_id, "brief": brief}
    return [
        {"role": "system", "content": "You plan the next step."},
        {"role": "user", "content": json.dumps(goal)},
    ]


def durable(
    app: Pressroom,
    model: ScriptedModel,
    saga_id: str,
    *,
    role: str = "draft",
    round: int = 0,
    profile: ModelProfile = PROFILE,
    role_budget: Budget | None = None,
    saga_budget: Budget | None = None,
    sleeps: list[float] | None = None,
) -> DurableChat:
    """A turn's model, as a role would make it: a fresh client, the store, the budgets."""
    bound = profile.model_copy(update={"base_url": model.url})
    return DurableChat(
        chat_for(bound),
        StoredModelCalls(app.engine),
        saga_id=saga_id,
        role=role,
        round=round,
        request_id=f"msg-{role}-{round}",
        profile_name="house",
        profile=bound,
        role_budget=role_budget,
        saga_budget=saga_budget,
        sleep=(sleeps if sleeps is not None else []).append,
        rng=random.Random(7),
    )


def model_events(app: Pressroom, saga_id: str) -> list[EventRow]:
    with Session(app.engine) as s:
        return list(
            s.exec(select(EventRow).where(EventRow.saga_id == saga_id, EventRow.kind == "model")).all()
        )


def test_a_reply_is_recorded_with_its_tokens_cost_params_digest_and_event(
    app: Pressroom, saga: str, spans: InMemorySpanExporter
) -> None:
    asked = messages(saga)
    with ScriptedModel("faithful", latency=0.0) as model:
        reply = durable(app, model, saga).complete(asked, TOOLS)
        stats = model.stats()
        [body] = model.requests
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, 7, 2000)
    assert reply.tool_calls and reply.tool_calls[0].name == "corpus_search"
    assert (reply.tokens_in, reply.tokens_out) == (stats.tokens_in, stats.tokens_out) and stats.tokens_in > 0
    assert reply.finish_reason == "tool_calls" and reply.model == MODEL_NAME

    [call] = calls_of(app.engine, saga)
    cost = (stats.tokens_in * 0.5 + stats.tokens_out * 1.5) / 1_000_000
    digest = request_digest(MODEL_NAME, params_of(PROFILE), asked, TOOLS)
    assert call["state"] == "answered" and call["seq"] == 1 and call["attempts"] == 1
    assert call["key"] == call_key(saga, "draft", 0, digest) and call["request_digest"] == digest
    assert call["params"] == {"temperature": 0.0, "seed": 7, "max_tokens": 2000}
    assert (call["role"], call["round"], call["profile"], call["model"]) == ("draft", 0, "house", MODEL_NAME)
    assert call["request_id"] == "msg-draft-0" and call["call_id"] == reply.tool_calls[0].id
    assert (call["tokens_in"], call["tokens_out"]) == (stats.tokens_in, stats.tokens_out)
    assert call["cost_usd"] == pytest.approx(cost) and call["latency_ms"] >= 0 and call["answered_at"]
    assert call["reply"] == {
        "text": None,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        "finish_reason": "tool_calls",
        "model": MODEL_NAME,
    }

    [event] = model_events(app, saga)
    assert event.status == "answered" and event.actor == "draft"
    detail = event.detail
    assert detail["request_digest"] == digest and detail["params"] == call["params"]
    assert (detail["role"], detail["model"], detail["call_id"]) == ("draft", MODEL_NAME, call["call_id"])
    assert (detail["tokens_in"], detail["tokens_out"]) == (stats.tokens_in, stats.tokens_out)
    assert detail["cost_usd"] == pytest.approx(cost) and detail["latency_ms"] == call["latency_ms"]

    with Session(app.engine) as s:
        charged = spent(s, saga)
    assert charged.tokens == stats.tokens_in + stats.tokens_out and charged.cost == pytest.approx(cost)
    assert charged.calls == 0  # a model call is not a tool call
    totals = {"model_calls": 1, "tokens_in": stats.tokens_in, "tokens_out": stats.tokens_out}
    assert usage(app.engine, saga) == {
        **totals,
        "cost_usd": pytest.approx(cost),
        "by_role": {"draft": {**totals, "cost_usd": pytest.approx(cost)}},
    }

    [span] = [s for s in spans.get_finished_spans() if s.name == f"chat {MODEL_NAME}"]
    attrs = dict(span.attributes or {})
    assert attrs[names.GEN_AI_OPERATION_NAME] == "chat" and attrs[names.GEN_AI_PROVIDER_NAME] == "openai"
    assert (
        attrs[names.GEN_AI_REQUEST_MODEL] == MODEL_NAME and attrs[names.GEN_AI_RESPONSE_MODEL] == MODEL_NAME
    )
    assert (attrs[names.GEN_AI_REQUEST_TEMPERATURE], attrs[names.GEN_AI_REQUEST_SEED]) == (0.0, 7)
    assert attrs[names.GEN_AI_REQUEST_MAX_TOKENS] == 2000
    assert attrs[names.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert attrs[names.GEN_AI_USAGE_INPUT_TOKENS] == stats.tokens_in
    assert attrs[names.GEN_AI_USAGE_OUTPUT_TOKENS] == stats.tokens_out
    assert attrs[names.ATTR_SAGA_ID] == saga and attrs[names.ATTR_ROLE] == "draft"
    assert attrs[names.ATTR_MODEL_COST_USD] == pytest.approx(cost)
    assert attrs[names.ATTR_MODEL_REPLAYED] is False


def test_the_same_request_in_the_same_turn_is_answered_from_the_record(
    app: Pressroom, saga: str, spans: InMemorySpanExporter
) -> None:
    with ScriptedModel("faithful", latency=0.0) as model:
        first = durable(app, model, saga).complete(messages(saga), TOOLS)
        again = durable(app, model, saga)  # the turn run again, as after a crash
        replayed = again.complete(messages(saga), TOOLS)
        assert model.stats().requests == 1, "the recorded reply answered: nothing was sent"
        assert replayed == first and again.replayed == 1 and again.requests == 0
        # Another request, or the same one in another round, is another call.
        durable(app, model, saga).complete(messages(saga, brief="the library's founding"), TOOLS)
        durable(app, model, saga, round=1).complete(messages(saga), TOOLS)
        assert model.stats().requests == 3
    assert [c["seq"] for c in calls_of(app.engine, saga)] == [1, 2, 3]
    assert len(model_events(app, saga)) == 3
    assert usage(app.engine, saga)["model_calls"] == 3
    flags = [dict(s.attributes or {})[names.ATTR_MODEL_REPLAYED] for s in spans.get_finished_spans()]
    assert flags == [False, True, False, False]


def test_an_unavailable_endpoint_is_retried_and_a_refusal_is_not(app: Pressroom, saga: str) -> None:
    sleeps: list[float] = []
    with ScriptedModel("429-then-ok", latency=0.0, fail_first=2) as model:
        reply = durable(app, model, saga, sleeps=sleeps).complete(messages(saga), TOOLS)
        assert model.stats().requests == 3 and model.stats().statuses == {"429": 2, "200": 1}
    assert reply.tool_calls
    [call] = calls_of(app.engine, saga)
    assert call["state"] == "answered" and call["attempts"] == 3
    assert len(sleeps) == 2 and all(0.0 <= s <= 1.0 for s in sleeps)  # Retry-After: 0, then the backoff

    asked = messages(saga, brief="always failing")
    sleeps.clear()
    with ScriptedModel("500", latency=0.0) as model:
        with pytest.raises(ModelUnavailable, match="500"):
            durable(
                app, model, saga, profile=PROFILE.model_copy(update={"max_retries": 2}), sleeps=sleeps
            ).complete(asked, TOOLS)
        assert model.stats().requests == 3  # max_retries + 1
    failed = calls_of(app.engine, saga)[1]
    assert failed["state"] == "failed" and failed["attempts"] == 3 and "500" in failed["error"]
    assert len(sleeps) == 2 and len(model_events(app, saga)) == 1
    # The lease brings the turn back: the failed call is asked again, and its requests add up.
    with ScriptedModel("faithful", latency=0.0) as model:
        durable(app, model, saga).complete(asked, TOOLS)
    failed = calls_of(app.engine, saga)[1]
    assert failed["state"] == "answered" and failed["attempts"] == 4 and failed["error"] is None

    with ScriptedModel("refuse", latency=0.0) as model:
        with pytest.raises(ModelRefused, match="400"):
            durable(app, model, saga).complete(messages(saga, brief="refused"), TOOLS)
        assert model.stats().requests == 1
    refused = calls_of(app.engine, saga)[2]
    assert refused["state"] == "failed" and refused["attempts"] == 1 and "400" in refused["error"]
    assert usage(app.engine, saga)["model_calls"] == 2


def test_a_spent_role_budget_refuses_the_next_call_before_it_is_sent(app: Pressroom, saga: str) -> None:
    with ScriptedModel("faithful", latency=0.0) as model:
        draft = durable(app, model, saga, role_budget=Budget(tokens=10))
        draft.complete(messages(saga), TOOLS)  # the call that crosses the budget is made and recorded
        [call] = calls_of(app.engine, saga)
        tokens = call["tokens_in"] + call["tokens_out"]
        with pytest.raises(BudgetExhausted) as refused:
            draft.complete(messages(saga, brief="one more"), TOOLS)
        assert str(refused.value) == f"budget exhausted: {tokens:,} of 10 tokens spent by role draft"
        assert model.stats().requests == 1, "nothing was sent after the budget was spent"
        # A call already answered is still answered from its record: it costs nothing more.
        assert durable(app, model, saga, role_budget=Budget(tokens=10)).complete(messages(saga), TOOLS)
        # Another role of the saga has its own budget.
        durable(app, model, saga, role="style", role_budget=Budget(tokens=10)).complete(messages(saga), TOOLS)
        assert model.stats().requests == 2

        priced = durable(app, model, saga, role="cost", role_budget=Budget(cost_usd=1e-6))
        priced.complete(messages(saga), TOOLS)
        with pytest.raises(
            BudgetExhausted, match=r"^budget exhausted: .* of 0\.000001 USD spent by role cost$"
        ):
            priced.complete(messages(saga, brief="one more"), TOOLS)
        assert model.stats().requests == 3
    assert len(calls_of(app.engine, saga)) == 3


def test_a_spent_saga_budget_refuses_every_role(app: Pressroom, saga: str) -> None:
    with ScriptedModel("faithful", latency=0.0) as model:
        whole = Budget(tokens=10)
        durable(app, model, saga, role="draft", saga_budget=whole).complete(messages(saga), TOOLS)
        with pytest.raises(
            BudgetExhausted, match=f"^budget exhausted: .* of 10 tokens spent by saga {saga}$"
        ):
            durable(app, model, saga, role="style", saga_budget=whole).complete(messages(saga), TOOLS)
        assert model.stats().requests == 1
    assert [c["role"] for c in calls_of(app.engine, saga)] == ["draft"]


def test_a_reply_recorded_twice_is_kept_charged_and_logged_once(app: Pressroom, saga: str) -> None:
    digest = "d" * 64
    intent = CallIntent(call_key(saga, "draft", 0, digest), saga, "draft", 0, None, "house", "m", {}, digest)
    record_intent(app.engine, intent)
    reply = {"text": "first", "tool_calls": [], "finish_reason": "stop", "model": "m"}
    first = record_reply(app.engine, intent, CallAnswer(reply, None, 100, 10, 0.5, 12, 1))
    late = CallAnswer({**reply, "text": "second"}, None, 200, 20, 1.0, 15, 1)
    second = record_reply(app.engine, intent, late)
    assert first.reply == second.reply == reply
    with Session(app.engine) as s:
        assert spent(s, saga).tokens == 110
    assert len(model_events(app, saga)) == 1


def test_concurrent_intents_of_one_saga_take_distinct_places(pg_url: str, tmp_path: Path) -> None:
    app = make_app(pg_url, tmp_path, broker_url="none://")
    saga_id = app.submissions.submit(
        brief="history of the library network",
        corpus=str(SAMPLE_CORPUS),
        destinations=["memory:m"],
        actor="dana",
    )["saga_id"]
    start = threading.Barrier(6)

    def intend(n: int) -> None:
        digest = f"{n:064d}"
        start.wait()
        intent = CallIntent(call_key(saga_id, "r", 0, digest), saga_id, "r", 0, None, "p", "m", {}, digest)
        record_intent(app.engine, intent)

    threads = [threading.Thread(target=intend, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(c["seq"] for c in calls_of(app.engine, saga_id)) == [1, 2, 3, 4, 5, 6]


def test_no_transaction_is_open_while_the_model_answers(pg_url: str, tmp_path: Path) -> None:
    app = make_app(pg_url, tmp_path, broker_url="none://")
    saga_id = app.submissions.submit(
        brief="history of the library network",
        corpus=str(SAMPLE_CORPUS),
        destinations=["memory:m"],
        actor="dana",
    )["saga_id"]
    database = app.engine.url.database
    seen: dict[str, Any] = {}
    with ScriptedModel("slow", latency=1.5) as model:
        chat = durable(app, model, saga_id)
        worker = threading.Thread(target=lambda: seen.update(reply=chat.complete(messages(saga_id), TOOLS)))
        worker.start()
        deadline = time.monotonic() + 10
        while model.stats().in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert model.stats().in_flight == 1, "the request never reached the model"
        plain = str(app.engine.url.set(drivername="postgresql").render_as_string(hide_password=False))
        with psycopg.connect(plain, autocommit=True) as conn:
            seen["sessions"] = conn.execute(
                "SELECT state FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            ).fetchall()
            seen["intent"] = conn.execute("SELECT state FROM model_calls").fetchall()
        worker.join(timeout=30)
    assert "reply" in seen, "the call did not finish"
    states = [state for (state,) in seen["sessions"]]
    assert not [s for s in states if s and s.startswith("idle in transaction")], states
    assert "active" not in states, states  # no statement of this process was waiting either
    assert seen["intent"] == [("intent",)], "the intent was committed before the request"
    assert calls_of(app.engine, saga_id)[0]["state"] == "answered"

"""The pure rules of a durable model call: digest and key, cost, usage, budgets, backoff, and the
`Retry-After` a response asks for."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from orchestrator.core.pipeline import Budget, ModelProfile
from orchestrator.harness.model_calls import (
    BACKOFF_CAP,
    Usage,
    backoff,
    call_key,
    cost_usd,
    over_budget,
    request_digest,
)
from outbox.waits import wait
from roles.llm_client import AsyncOpenAIChat, chat_for, retry_after

PARAMS = {"temperature": 0.0, "seed": 7, "max_tokens": 2000}
MESSAGES = [{"role": "system", "content": "plan"}, {"role": "user", "content": '{"role": "writer"}'}]
TOOLS = [{"type": "function", "function": {"name": "draft_write", "parameters": {"type": "object"}}}]


def test_the_digest_covers_model_params_messages_and_tools_and_not_key_order() -> None:
    digest = request_digest("m", PARAMS, MESSAGES, TOOLS)
    assert len(digest) == 64
    reordered = [{"content": m["content"], "role": m["role"]} for m in MESSAGES]
    assert request_digest("m", dict(reversed(PARAMS.items())), reordered, TOOLS) == digest
    others = {
        request_digest("m2", PARAMS, MESSAGES, TOOLS),
        request_digest("m", {**PARAMS, "seed": 8}, MESSAGES, TOOLS),
        request_digest("m", PARAMS, [*MESSAGES, {"role": "user", "content": "more"}], TOOLS),
        request_digest("m", PARAMS, MESSAGES, []),
    }
    assert digest not in others and len(others) == 4


def test_the_key_is_one_request_in_one_turn_of_one_role() -> None:
    key = call_key("s-1", "draft", 0, "d" * 64)
    assert key == call_key("s-1", "draft", 0, "d" * 64)
    assert len({key, call_key("s-2", "draft", 0, "d" * 64), call_key("s-1", "style", 0, "d" * 64)}) == 3
    assert key != call_key("s-1", "draft", 1, "d" * 64)
    assert key != call_key("s-1", "draft", 0, "e" * 64)


def test_cost_is_tokens_at_the_prices_per_million() -> None:
    profile = ModelProfile(model="m", price_in=0.5, price_out=1.5)
    assert cost_usd(profile, 1_000_000, 0) == 0.5
    assert cost_usd(profile, 0, 2_000_000) == 3.0
    assert cost_usd(profile, 1200, 300) == pytest.approx((1200 * 0.5 + 300 * 1.5) / 1e6)
    assert cost_usd(ModelProfile(model="m"), 10_000, 10_000) == 0.0


def test_usage_adds_up_and_reads_the_store_totals() -> None:
    total = Usage(1, 100, 20, 0.25) + Usage(2, 50, 5, 0.5)
    assert total == Usage(3, 150, 25, 0.75) and total.tokens == 175
    assert Usage.of(None) == Usage() == Usage.of({})
    read = Usage.of({"model_calls": 3, "tokens_in": 150, "tokens_out": 25, "cost_usd": 0.75, "by_role": {}})
    assert read == total and Usage.of(read.as_dict()) == read


def test_a_budget_is_spent_once_its_ceiling_is_reached() -> None:
    tokens = Budget(tokens=40_000)
    assert over_budget(Usage(tokens_in=30_000, tokens_out=9_999), tokens, "role draft") is None
    assert over_budget(Usage(tokens_in=40_000), tokens, "role draft") is not None
    reason = over_budget(Usage(2, 40_000, 1_200), tokens, "role draft")
    assert reason == "budget exhausted: 41,200 of 40,000 tokens spent by role draft"
    cost = over_budget(Usage(cost_usd=0.0125), Budget(cost_usd=0.01), "saga s-1")
    assert (
        cost is not None and cost.startswith("budget exhausted: ") and cost.endswith("USD spent by saga s-1")
    )
    assert "0.012500 of 0.010000" in cost
    assert over_budget(Usage(cost_usd=0.0099), Budget(cost_usd=0.01), "saga s-1") is None
    assert over_budget(Usage(9, 10**9, 10**9, 10.0), None, "role draft") is None
    assert over_budget(Usage(9, 10**9, 10**9, 10.0), Budget(), "role draft") is None


def test_backoff_is_exponential_jittered_capped_and_honours_retry_after() -> None:
    assert [backoff(n, None) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert backoff(30, None) == BACKOFF_CAP
    draws = [backoff(3, None, rng=random.Random(7)) for _ in range(3)]
    assert len(set(draws)) == 1 and 0.0 <= draws[0] <= 2.0  # seeded: the same draw every time
    rng = random.Random(1)
    spread = [backoff(4, None, rng=rng) for _ in range(200)]
    assert all(0.0 <= d <= 4.0 for d in spread) and max(spread) - min(spread) > 2.0
    assert backoff(1, 3.0, rng=random.Random(7)) == 3.0  # never sooner than the server asked
    assert backoff(1, 0.0) == 0.5
    assert backoff(1, 10_000.0) == BACKOFF_CAP


def test_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "0"}) == 0.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    date = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after({"retry-after": date}, now=now) == 30.0
    assert retry_after({}) is None
    for nonsense in ("soon", "-5", "nan", "1e12"):
        assert retry_after({"retry-after": nonsense}, now=now) is None, nonsense


def test_a_retry_after_date_is_measured_on_the_servers_clock() -> None:
    ours = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    theirs = ours - timedelta(minutes=10)  # the server's clock is ten minutes behind ours
    headers = httpx.Headers(
        {
            "Date": format_datetime(theirs, usegmt=True),
            "Retry-After": format_datetime(theirs + timedelta(seconds=30), usegmt=True),
        }
    )
    assert retry_after(headers, now=ours) == 30.0
    assert retry_after(httpx.Headers({"Date": "garbage", "Retry-After": headers["retry-after"]}), now=ours) is None


def test_the_rules_load_no_adapter() -> None:
    code = (
        "import sys, orchestrator.harness.model_calls\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'sqlmodel', 'psycopg', 'httpx', 'openai', 'sqlite3') or m.startswith('opentelemetry'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def _client(profile: ModelProfile) -> Any:
    """The async client `chat_for(profile)` asks through, on the loop its requests wait on."""
    chat = chat_for(profile)
    assert isinstance(chat.inner, AsyncOpenAIChat)
    inner = chat.inner

    async def on_the_loop() -> Any:
        return inner.client()

    return wait(on_the_loop)


def test_a_profile_key_is_read_from_its_variable_when_the_client_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = ModelProfile(
        model="m", base_url="http://127.0.0.1:9/v1", api_key_env="HOUSE_TEST_KEY", timeout=5
    )
    monkeypatch.delenv("HOUSE_TEST_KEY", raising=False)
    assert _client(profile).api_key == "unused"
    monkeypatch.setenv("HOUSE_TEST_KEY", "key-one")
    first = _client(profile)
    assert first.api_key == "key-one" and first.max_retries == 0
    assert _client(profile) is first  # one client per loop, endpoint, model, key, timeout
    monkeypatch.setenv("HOUSE_TEST_KEY", "key-two")
    assert _client(profile).api_key == "key-two"
    inner = chat_for(profile).inner
    assert isinstance(inner, AsyncOpenAIChat)
    assert inner.params == {"temperature": 0.0, "max_tokens": 2000}  # no seed in the profile: none sent
    assert _client(ModelProfile(model="m", base_url="http://127.0.0.1:9/v1")).api_key == "unused"

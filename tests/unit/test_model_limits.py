"""Per-profile model limits with a fake clock: calls in flight, requests and tokens per minute,
and a 429's cool-down on its own profile only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.pipeline import InvalidPipeline, KindInfo, ModelProfile, parse_pipeline
from roles.model_limits import BUSY_WAIT, ModelLimits, key_of, token_estimate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


KINDS = {"researcher": KindInfo("researcher", "evidence"), "writer": KindInfo("writer", "version")}
A = ModelProfile(base_url="http://a.example/v1", model="m", concurrency=2)
B = ModelProfile(base_url="http://b.example/v1", model="m", concurrency=2)


def test_at_most_concurrency_calls_are_in_flight_and_a_release_frees_one() -> None:
    limits = ModelLimits(clock=Clock())
    assert limits.take(A, 10) is None and limits.take(A, 10) is None
    assert limits.take(A, 10) == BUSY_WAIT
    assert limits.in_flight(A) == 2
    assert limits.take(B, 10) is None  # another endpoint has limits of its own
    limits.release(A, 5)
    assert limits.take(A, 10) is None
    assert limits.take(A, 10) == BUSY_WAIT


def test_the_same_endpoint_and_model_share_limits_whatever_the_other_fields() -> None:
    limits = ModelLimits(clock=Clock())
    same = A.model_copy(update={"temperature": 1.0})
    assert key_of(same) == key_of(A)
    limits.take(A, 1), limits.take(same, 1)
    assert limits.take(A, 1) is not None
    assert limits.take(A.model_copy(update={"model": "other"}), 1) is None


def test_requests_per_minute_wait_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    limits = ModelLimits(clock=clock)
    profile = A.model_copy(update={"requests_per_minute": 2, "concurrency": 10})
    assert limits.take(profile, 1) is None
    clock.now += 10
    assert limits.take(profile, 1) is None
    clock.now += 5
    assert limits.take(profile, 1) == pytest.approx(45.0)  # the first started 15 s ago
    limits.release(profile, 1), limits.release(profile, 1)
    assert limits.take(profile, 1) == pytest.approx(45.0)  # ended calls still count in the minute
    clock.now += 45
    assert limits.take(profile, 1) is None


def test_tokens_per_minute_count_estimates_then_what_was_used() -> None:
    clock = Clock()
    limits = ModelLimits(clock=clock)
    profile = A.model_copy(update={"tokens_per_minute": 1000, "concurrency": 10})
    assert limits.take(profile, 600) is None
    assert limits.take(profile, 600) == pytest.approx(60.0)  # 1200 > 1000 until the first leaves
    limits.release(profile, 100)  # it used far less than estimated
    assert limits.take(profile, 600) is None  # 100 + 600
    clock.now += 30
    assert limits.take(profile, 400) == pytest.approx(30.0)  # 700 + 400: fits once the first (100) leaves
    assert limits.take(profile, 300) is None  # 700 + 300


def test_a_call_larger_than_the_token_limit_goes_alone() -> None:
    limits = ModelLimits(clock=Clock())
    profile = A.model_copy(update={"tokens_per_minute": 100})
    assert limits.take(profile, 5000) is None
    assert limits.take(profile, 1) is not None


def test_a_429_cools_down_its_profile_only() -> None:
    clock = Clock()
    limits = ModelLimits(clock=clock)
    assert limits.cool_down(A, 30.0) == 30.0
    assert limits.take(A, 1) == pytest.approx(30.0)
    assert limits.take(B, 1) is None
    clock.now += 29.5
    assert limits.take(A, 1) == pytest.approx(0.5)
    clock.now += 0.5
    assert limits.take(A, 1) is None


def test_a_429_without_retry_after_backs_off_exponentially_bounded_and_an_answer_resets_it() -> None:
    clock = Clock()
    limits = ModelLimits(clock=clock)
    waits = [limits.cool_down(A, None) for _ in range(12)]
    assert waits[:3] == [0.5, 1.0, 2.0]
    assert waits == sorted(waits) and max(waits) == 30.0
    clock.now += 31
    assert limits.take(A, 1) is None
    limits.release(A, 10)
    assert limits.cool_down(A, None) == 0.5


def test_a_release_without_a_take_holds_nothing() -> None:
    limits = ModelLimits(clock=Clock())
    limits.release(A, 10)
    assert limits.in_flight(A) == 0
    assert limits.take(A, 1) is None and limits.take(A, 1) is None and limits.take(A, 1) is not None


def test_the_estimate_is_the_answer_ceiling_plus_the_prompt() -> None:
    assert token_estimate(A.model_copy(update={"max_tokens": 100}), 400) == 200


@settings(max_examples=60, deadline=None)
@given(
    concurrency=st.integers(1, 5),
    rpm=st.none() | st.integers(1, 8),
    steps=st.lists(st.tuples(st.sampled_from(["take", "release", "tick"]), st.integers(0, 40)), max_size=60),
)
def test_no_sequence_exceeds_the_limits(
    concurrency: int, rpm: int | None, steps: list[tuple[str, int]]
) -> None:
    clock = Clock()
    limits = ModelLimits(clock=clock)
    profile = A.model_copy(update={"concurrency": concurrency, "requests_per_minute": rpm})
    starts: list[float] = []
    held = 0
    for op, n in steps:
        if op == "tick":
            clock.now += n
        elif op == "release":
            limits.release(profile, n)
            held = max(0, held - 1)
        else:
            wait = limits.take(profile, n)
            if wait is None:
                held += 1
                starts.append(clock.now)
            else:
                assert wait > 0
        assert limits.in_flight(profile) == held <= concurrency
        if rpm is not None:
            assert sum(1 for t in starts if t > clock.now - 60) <= rpm


@pytest.mark.parametrize("field", ["requests_per_minute", "tokens_per_minute"])
def test_a_limit_below_one_is_refused_naming_its_field(field: str) -> None:
    text = f"""
[model.house]
model = "m"
{field} = 0

[[role]]
name = "research"
kind = "researcher"
planner = "house"

[[role]]
name = "draft"
kind = "writer"
after = ["research"]
"""
    with pytest.raises(InvalidPipeline, match=rf"model\.house\.{field}"):
        parse_pipeline("p", text, source="p.toml", kinds=KINDS)

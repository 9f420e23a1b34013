"""The registry's link and clock kinds and the schedules they are drawn into: pure, no services."""

from __future__ import annotations

from chaos import links  # registers the link kinds, after the nemesis's built-ins
from chaos.faults import REGISTRY, plan, runnable
from orchestrator.core.config import Settings

LINK_KINDS = {"partition-postgres", "partition-redis", "link-latency", "link-cut", "half-open-redis"}
NEW_KINDS = LINK_KINDS | {"clock-skew"}


def test_the_link_and_clock_kinds_are_registered_with_what_they_need() -> None:
    assert NEW_KINDS <= set(REGISTRY)
    assert all(REGISTRY[k].requires == ("links",) for k in LINK_KINDS)
    assert REGISTRY["clock-skew"].requires == ("faketime",)
    assert REGISTRY["partition-postgres"].targets == ("postgresql",)
    assert REGISTRY["partition-redis"].targets == ("redis",)
    assert REGISTRY["half-open-redis"].targets == ("redis",)
    assert (
        set(REGISTRY["link-latency"].targets) == set(REGISTRY["link-cut"].targets) == {"postgresql", "redis"}
    )
    assert set(REGISTRY["clock-skew"].targets) == {
        f"worker-{q}" for q in ("researcher", "writer", "reviewer", "publisher")
    }
    assert not any(REGISTRY[k].late for k in NEW_KINDS)
    assert all(REGISTRY[k].heal is not None for k in NEW_KINDS), "each heals when the faults stop"
    holds = {k: REGISTRY[k].hold for k in NEW_KINDS - {"half-open-redis"}}
    assert holds == {
        "partition-postgres": (2.0, 20.0),
        "partition-redis": (2.0, 20.0),
        "link-latency": (5.0, 20.0),
        "link-cut": (3.0, 10.0),
        "clock-skew": (15.0, 30.0),
    }, "as docs/reliability.md gives them"


def test_partitions_outlast_the_link_timeout_sometimes_and_a_half_open_link_its_detection() -> None:
    timeout = Settings.model_fields["link_timeout"].default
    for kind in ("partition-postgres", "partition-redis"):
        low, high = REGISTRY[kind].hold
        assert low < timeout < high
    assert (
        REGISTRY["half-open-redis"].hold == (1 + 2 * timeout, 1 + 2 * timeout) == (links.HALF_OPEN_HOLD,) * 2
    )


def test_a_default_run_meets_every_kind() -> None:
    """60 sagas, 150 s of faults: the first round holds every kind once, for any of these seeds."""
    for seed in range(1, 31):
        assert {f.kind for f in plan(seed, 150.0)} == set(REGISTRY), seed


def test_a_run_without_the_proxies_or_libfaketime_leaves_their_kinds_out() -> None:
    direct = runnable({"route"})
    assert NEW_KINDS.isdisjoint(direct) and set(REGISTRY) - NEW_KINDS == set(direct)
    assert set(runnable({"route", "links"})) == set(REGISTRY) - {"clock-skew"}
    assert set(runnable({"route", "links", "faketime"})) == set(REGISTRY)
    assert list(runnable({"links", "faketime"})) == list(REGISTRY), "registration order kept"
    for seed in range(1, 11):
        assert NEW_KINDS.isdisjoint(f.kind for f in plan(seed, 150.0, direct))


def test_the_seeded_options_of_the_new_kinds() -> None:
    skews, latencies = [], []
    for seed in range(1, 41):
        schedule = plan(seed, 150.0)
        assert schedule == plan(seed, 150.0), "the same seed, the same schedule"
        for f in schedule:
            if f.kind == "clock-skew":
                skews.append(f.option("skew_minutes"))
            elif f.kind == "link-latency":
                latencies.append((f.option("latency_ms"), f.option("jitter_ms")))
            elif f.kind in LINK_KINDS:
                assert f.options == ()
    assert skews and all(isinstance(m, int) and 2 <= abs(m) <= 10 for m in skews)
    assert min(skews) < 0 < max(skews), "ahead and behind"
    assert latencies and all(20 <= ms <= 200 and 0 <= jitter <= ms // 2 for ms, jitter in latencies)
    assert len(set(skews)) > 5 and len(set(latencies)) > 5, "drawn, not fixed"

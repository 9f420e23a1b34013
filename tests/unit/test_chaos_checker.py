"""The chaos suite's checker and nemesis schedule on synthetic records: pure, no services."""

from __future__ import annotations

import dataclasses

import pytest

from chaos import faults
from chaos.checker import Approval, Effect, Records, Saga, Step, Submission, check
from chaos.destinations import HOOK_NAMES
from chaos.faults import Fault, FaultKind
from chaos.nemesis import REGISTRY, WORKERS, plan

SITE, GIT = "site:/srv/site", "git:/srv/repo"
HOOK, HOOK_B = "webhook:http://127.0.0.1:9/hook", "webhook:http://127.0.0.1:10/hook"
DESTS = ((SITE, "site"), (GIT, "git"), (HOOK, "hook"), (HOOK_B, "hook-b"))


def _saga(sid: str, state: str, *, step_state: str = "done") -> Saga:
    return Saga(sid, state, None, tuple(Step(uri, step_state, f"{sid}-{n}", f"d-{sid}") for uri, n in DESTS))


def _clean(
    sid: str,
) -> tuple[Approval, dict[str, str | None], tuple[Effect, ...], dict[tuple[str, str], str | None]]:
    """What a saga that succeeded leaves: an approval, ledger keys, one apply per destination
    (the site's record does not name the saga; the others do)."""
    return (
        Approval(sid, f"d-{sid}", tuple(uri for uri, _ in DESTS), consumed=True),
        {f"{sid}-{n}": sid for _, n in DESTS},
        tuple(
            Effect(uri, "apply", f"{sid}-{n}", None if uri == SITE else sid, f"d-{sid}") for uri, n in DESTS
        ),
        {(uri, f"{sid}-{n}"): f"d-{sid}" for uri, n in DESTS},
    )


def _records(
    sagas: list[Saga],
    *,
    settled: list[Saga] | None = None,
    extra_effects: tuple[Effect, ...] = (),
    extra_live: dict[tuple[str, str], str | None] | None = None,
    approvals: list[Approval] | None = None,
    submissions: list[Submission] | None = None,
    reconciled: tuple[tuple[str, str, str], ...] = (),
    retried: tuple[str, ...] = (),
) -> Records:
    ledger: dict[str, str | None] = {}
    live: dict[tuple[str, str], str | None] = {}
    effects: tuple[Effect, ...] = ()
    granted = []
    for s in sagas:
        approval, keys, applied, held = _clean(s.saga_id)
        granted.append(approval)
        ledger.update(keys)
        live.update(held)
        effects += applied
    return Records(
        submissions=tuple(
            submissions
            if submissions is not None
            else [Submission(f"r-{s.saga_id}", s.saga_id) for s in sagas]
        ),
        settled=tuple(settled if settled is not None else sagas),
        final=tuple(sagas),
        approvals=tuple(approvals if approvals is not None else granted),
        ledger=ledger,
        effects=effects + extra_effects,
        live={**live, **(extra_live or {})},
        reconciled=reconciled,
        retried=retried,
    )


def test_a_clean_run_has_no_finding() -> None:
    found = check(_records([_saga("a", "succeeded"), _saga("b", "succeeded")]))
    assert found.ok
    assert found.states_final == {"succeeded": 2}
    assert found.effects_applied == 8 and found.effects_undone == 0
    assert found.per_destination == {uri: {"applied": 2, "undone": 0, "live": 2} for uri, _ in DESTS}


def test_a_submission_without_a_saga_is_lost() -> None:
    recs = _records(
        [_saga("a", "succeeded")],
        submissions=[
            Submission("r-a", "a"),
            Submission("r-x", None, attempts=10),
            Submission("r-y", "not-in-db"),
        ],
    )
    found = check(recs)
    assert found.lost == ["r-x", "r-y"] and not found.ok


def test_a_saga_not_settled_is_stuck() -> None:
    stuck = Saga("b", "executing", "waiting", (Step(SITE, "pending", "b-site", "d-b"),))
    recs = _records([_saga("a", "succeeded")], settled=[_saga("a", "succeeded"), stuck])
    found = check(recs)
    assert [s["saga_id"] for s in found.stuck] == ["b"] and not found.ok


@pytest.mark.parametrize(("uri", "name"), DESTS)
def test_a_key_applied_again_while_live_is_a_duplicate_at_every_destination(uri: str, name: str) -> None:
    again = Effect(uri, "apply", f"a-{name}", "a", "d-a")
    found = check(_records([_saga("a", "succeeded")], extra_effects=(again,)))
    assert found.duplicates == [
        {"uri": uri, "key": f"a-{name}", "applies": 2, "why": "key applied again while live"}
    ]


def test_a_key_applied_undone_and_applied_again_is_a_retry_not_a_duplicate() -> None:
    retried = (Effect(GIT, "undo", "a-git"), Effect(GIT, "apply", "a-git", "a", "d-a"))
    found = check(_records([_saga("a", "succeeded")], extra_effects=retried))
    assert found.ok and not found.duplicates
    assert found.per_destination[GIT] == {"applied": 2, "undone": 1, "live": 1}


def test_a_replay_of_the_same_key_is_not_a_duplicate() -> None:
    replay = Effect(HOOK, "replay", "a-hook", "a", "d-a")
    assert check(_records([_saga("a", "succeeded")], extra_effects=(replay,))).ok


def test_two_live_effects_of_one_saga_at_one_destination_are_a_duplicate() -> None:
    recs = _records(
        [_saga("a", "succeeded")],
        extra_effects=(Effect(GIT, "apply", "a-git-2", "a", "d-a"),),
        extra_live={(GIT, "a-git-2"): "d-a"},
    )
    recs.ledger["a-git-2"] = "a"
    found = check(recs)
    assert any(d.get("keys") == ["a-git", "a-git-2"] for d in found.duplicates)


def test_an_effect_no_consumed_approval_covers_is_unauthorized() -> None:
    # the approval exists but was never consumed; and another digest than the approved one
    everywhere = tuple(uri for uri, _ in DESTS)
    recs = _records(
        [_saga("a", "succeeded"), _saga("b", "succeeded")],
        approvals=[
            Approval("a", "d-a", everywhere, consumed=False),
            Approval("b", "d-other", everywhere, True),
        ],
    )
    found = check(recs)
    assert {(u["saga_id"], u["uri"]) for u in found.unauthorized} == {
        (s, uri) for s in "ab" for uri in everywhere
    }


def test_an_approval_for_other_destinations_does_not_cover() -> None:
    recs = _records([_saga("a", "succeeded")], approvals=[Approval("a", "d-a", (SITE, HOOK), consumed=True)])
    assert sorted(u["uri"] for u in check(recs).unauthorized) == sorted([GIT, HOOK_B])


def test_an_effect_of_an_unknown_key_is_unauthorized() -> None:
    stray = Effect(SITE, "apply", "nobody-knows", None, "d-a")
    found = check(_records([_saga("a", "succeeded")], extra_effects=(stray,)))
    assert [u["key"] for u in found.unauthorized] == ["nobody-knows"]


def test_a_failed_saga_must_leave_nothing_live_at_any_destination() -> None:
    recs = _records([_saga("a", "failed", step_state="compensated")])
    found = check(recs)
    assert {o["uri"] for o in found.orphans} == {uri for uri, _ in DESTS}
    undos = tuple(Effect(uri, "undo", f"a-{n}") for uri, n in DESTS)
    found = check(dataclasses.replace(recs, effects=recs.effects + undos, live={}))
    assert found.ok and found.effects_undone == 4


@pytest.mark.parametrize(("uri", "name"), DESTS)
def test_a_succeeded_saga_missing_an_effect_is_reported(uri: str, name: str) -> None:
    recs = _records([_saga("a", "succeeded")], extra_effects=(Effect(uri, "undo", f"a-{name}"),))
    del recs.live[(uri, f"a-{name}")]
    found = check(recs)
    assert [m["uri"] for m in found.missing] == [uri] and not found.inconsistent


def test_a_record_that_does_not_replay_to_what_the_destination_holds_is_inconsistent() -> None:
    recs = _records([_saga("a", "succeeded")])
    del recs.live[(HOOK_B, "a-hook-b")]  # the record says applied, the destination does not hold it
    recs.live[(SITE, "never-journaled")] = "d-a"  # held, though the record never applied it
    found = check(recs)
    assert {(i["uri"], i["key"]) for i in found.inconsistent} == {
        (HOOK_B, "a-hook-b"),
        (SITE, "never-journaled"),
    }
    assert not found.ok


def test_effect_unknown_reconciled_then_finished_is_resolved() -> None:
    unknown = _saga("a", "effect-unknown", step_state="uncertain")
    recs = _records([_saga("a", "succeeded")], settled=[unknown], reconciled=(("a", HOOK, "confirmed"),))
    found = check(recs)
    assert found.ok and found.effect_unknown == 1 and found.reconciled == {"confirmed": 1}


def test_effect_unknown_left_unfinished_is_unresolved() -> None:
    unknown = _saga("a", "effect-unknown", step_state="uncertain")
    recs = _records([unknown], settled=[unknown])
    found = check(recs)
    assert found.unresolved == [{"saga_id": "a", "state": "effect-unknown"}] and not found.ok
    assert not found.stuck, "effect-unknown when settled is honest, not stuck"


def test_retried_sagas_are_counted_and_must_finish() -> None:
    failed = _saga("b", "failed", step_state="compensated")
    recs = _records([_saga("a", "succeeded"), _saga("c", "succeeded")], settled=[failed], retried=("a", "c"))
    found = check(recs)
    assert (found.retried, found.succeeded_after_retry) == (2, 2) and found.ok
    again = _saga("c", "executing", step_state="pending")
    found = check(dataclasses.replace(recs, final=(recs.final[0], again)))
    assert found.unresolved == [{"saga_id": "c", "state": "executing"}]
    assert (found.retried, found.succeeded_after_retry) == (2, 1)


def test_the_nemesis_schedule_is_seeded() -> None:
    assert plan(7, 120) == plan(7, 120)
    assert plan(7, 120) != plan(8, 120)
    schedule = plan(3, 900)
    assert all(0 < f.at < 900 for f in schedule)
    assert {f.kind for f in schedule} == set(REGISTRY), "a long schedule uses every kind of fault"
    by_kind = {f.kind: f for f in schedule}
    assert all(f.target in WORKERS for f in schedule if f.kind in ("kill-worker", "pause-worker"))
    assert all(f.target in HOOK_NAMES for f in schedule if f.kind.startswith(("webhook-", "delete-")))
    assert all(REGISTRY[k].hold[0] <= f.hold <= REGISTRY[k].hold[1] for k, f in by_kind.items())


def test_the_built_in_kinds_fail_deletes_and_kill_no_pool_child() -> None:
    assert {"delete-5xx", "delete-refuse"} <= set(REGISTRY)
    assert "kill-pool-child" not in REGISTRY, "threads-pool workers have no pool child"
    first = plan(1, 120)[: len(REGISTRY)]
    assert sorted(f.kind for f in first) == sorted(REGISTRY), "a short run meets every kind once"
    late = {k for k, kind in REGISTRY.items() if kind.late}
    assert {f.kind for f in first[-len(late) :]} == late, "the destinations' faults come last"


def _noop(_nemesis: object, _fault: Fault) -> None:
    return None


def test_a_registered_kind_joins_the_schedule_and_plan_stays_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    before = plan(5, 300)
    table = dict(REGISTRY)
    monkeypatch.setattr(faults, "REGISTRY", table)
    faults.register(FaultKind("link-partition", 50.0, (1.0, 2.0), _noop, targets=("postgres", "redis")))
    after = plan(5, 300)
    assert after == plan(5, 300) != before
    links = [f for f in after if f.kind == "link-partition"]
    assert links and all(f.target in ("postgres", "redis") and 1.0 <= f.hold <= 2.0 for f in links)
    with pytest.raises(ValueError, match="registered already"):
        faults.register(FaultKind("link-partition", 1.0, (0.0, 1.0), _noop))
    only = {"link-partition": table["link-partition"]}
    assert {f.kind for f in plan(5, 300, only)} == {"link-partition"}

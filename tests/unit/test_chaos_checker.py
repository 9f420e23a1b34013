"""The chaos suite's checker and nemesis schedule on synthetic records: pure, no services."""

from __future__ import annotations

from chaos.checker import Approval, Effect, Records, Saga, Step, Submission, check
from chaos.nemesis import FAULTS, plan

SITE, HOOK = "site:/srv/site", "webhook:http://127.0.0.1:9/hook"


def _saga(sid: str, state: str, *, keys: tuple[str, str] | None = None, step_state: str = "done") -> Saga:
    k1, k2 = keys or (f"{sid}-site", f"{sid}-hook")
    return Saga(
        sid, state, None, (Step(SITE, step_state, k1, f"d-{sid}"), Step(HOOK, step_state, k2, f"d-{sid}"))
    )


def _clean(sid: str) -> dict[str, object]:
    """What a saga that succeeded leaves: an approval, ledger keys, one apply per destination."""
    return {
        "approval": Approval(sid, f"d-{sid}", (SITE, HOOK), consumed=True),
        "ledger": {f"{sid}-site": sid, f"{sid}-hook": sid},
        "effects": (
            Effect(SITE, "apply", f"{sid}-site", None, f"d-{sid}"),
            Effect(HOOK, "apply", f"{sid}-hook", sid, f"d-{sid}"),
        ),
        "live": {(SITE, f"{sid}-site"): f"d-{sid}", (HOOK, f"{sid}-hook"): f"d-{sid}"},
    }


def _records(
    sagas: list[Saga],
    *,
    settled: list[Saga] | None = None,
    extra_effects: tuple[Effect, ...] = (),
    extra_live: dict[tuple[str, str], str | None] | None = None,
    approvals: list[Approval] | None = None,
    submissions: list[Submission] | None = None,
    reconciled: tuple[tuple[str, str, str], ...] = (),
) -> Records:
    parts = [_clean(s.saga_id) for s in sagas]
    ledger: dict[str, str | None] = {}
    live: dict[tuple[str, str], str | None] = {}
    effects: tuple[Effect, ...] = ()
    for p in parts:
        ledger.update(p["ledger"])  # type: ignore[arg-type]
        live.update(p["live"])  # type: ignore[arg-type]
        effects += p["effects"]  # type: ignore[operator]
    return Records(
        submissions=tuple(
            submissions
            if submissions is not None
            else [Submission(f"r-{s.saga_id}", s.saga_id) for s in sagas]
        ),
        settled=tuple(settled if settled is not None else sagas),
        final=tuple(sagas),
        approvals=tuple(approvals if approvals is not None else [p["approval"] for p in parts]),  # type: ignore[misc]
        ledger=ledger,
        effects=effects + extra_effects,
        live={**live, **(extra_live or {})},
        reconciled=reconciled,
    )


def test_a_clean_run_has_no_finding() -> None:
    found = check(_records([_saga("a", "succeeded"), _saga("b", "succeeded")]))
    assert found.ok
    assert found.states_final == {"succeeded": 2}
    assert found.effects_applied == 4 and found.effects_undone == 0


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


def test_a_key_applied_twice_is_a_duplicate() -> None:
    again = Effect(HOOK, "apply", "a-hook", "a", "d-a")
    found = check(_records([_saga("a", "succeeded")], extra_effects=(again,)))
    assert found.duplicates == [
        {"uri": HOOK, "key": "a-hook", "applies": 2, "why": "key applied more than once"}
    ]


def test_a_replay_of_the_same_key_is_not_a_duplicate() -> None:
    replay = Effect(HOOK, "replay", "a-hook", "a", "d-a")
    assert check(_records([_saga("a", "succeeded")], extra_effects=(replay,))).ok


def test_two_live_effects_of_one_saga_at_one_destination_are_a_duplicate() -> None:
    recs = _records(
        [_saga("a", "succeeded")],
        extra_effects=(Effect(HOOK, "apply", "a-hook-2", "a", "d-a"),),
        extra_live={(HOOK, "a-hook-2"): "d-a"},
    )
    recs.ledger["a-hook-2"] = "a"
    found = check(recs)
    assert any(d.get("keys") == ["a-hook", "a-hook-2"] for d in found.duplicates)


def test_an_effect_no_consumed_approval_covers_is_unauthorized() -> None:
    # the approval exists but was never consumed; and another digest than the approved one
    recs = _records(
        [_saga("a", "succeeded"), _saga("b", "succeeded")],
        approvals=[
            Approval("a", "d-a", (SITE, HOOK), consumed=False),
            Approval("b", "d-other", (SITE, HOOK), consumed=True),
        ],
    )
    found = check(recs)
    assert {(u["saga_id"], u["uri"]) for u in found.unauthorized} == {
        ("a", SITE),
        ("a", HOOK),
        ("b", SITE),
        ("b", HOOK),
    }


def test_an_approval_for_other_destinations_does_not_cover() -> None:
    recs = _records([_saga("a", "succeeded")], approvals=[Approval("a", "d-a", (SITE,), consumed=True)])
    assert [u["uri"] for u in check(recs).unauthorized] == [HOOK]


def test_an_effect_of_an_unknown_key_is_unauthorized() -> None:
    stray = Effect(SITE, "apply", "nobody-knows", None, "d-a")
    found = check(_records([_saga("a", "succeeded")], extra_effects=(stray,)))
    assert [u["key"] for u in found.unauthorized] == ["nobody-knows"]


def test_a_failed_saga_must_leave_nothing_live() -> None:
    failed = _saga("a", "failed", step_state="compensated")
    recs = _records([failed])
    found = check(recs)
    assert {o["uri"] for o in found.orphans} == {SITE, HOOK}
    undone = Records(
        **{
            **recs.__dict__,
            "effects": recs.effects
            + (Effect(SITE, "undo", "a-site"), Effect(HOOK, "undo", "a-hook", "a", "d-a")),
            "live": {},
        }
    )
    found = check(undone)
    assert found.ok and found.effects_undone == 2


def test_a_succeeded_saga_missing_an_effect_is_reported() -> None:
    recs = _records([_saga("a", "succeeded")])
    del recs.live[(HOOK, "a-hook")]
    assert [m["uri"] for m in check(recs).missing] == [HOOK]


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


def test_the_nemesis_schedule_is_seeded() -> None:
    assert plan(7, 120) == plan(7, 120)
    assert plan(7, 120) != plan(8, 120)
    faults = plan(3, 600)
    assert all(0 < f.at < 600 for f in faults)
    assert {f.kind for f in faults} == set(FAULTS), "a long schedule uses every kind of fault"
    assert all(
        f.target and f.target.startswith("worker-")
        for f in faults
        if f.kind in ("kill-worker", "kill-pool-child", "pause-worker")
    )

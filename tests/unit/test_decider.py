"""The saga decider alone: what it commands for given steps, and random runs of outcomes.

The hypothesis runs play an execution to its end: every command the decider
returns is carried out against a random outcome per call (ok, error,
uncertain for a publish; ok, failed for an undo), the way the runner would.
They check that nothing is published after a definite failure, that undos
run the last completed first, and that an uncertain step is never published
again without a person.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from sagas import decider
from sagas.decider import Compensate, Publish, Saga, StartExecution, Step, Transition, Wait, next_command
from sagas.machine import SagaEvent, SagaState, apply
from sagas.step_states import StepState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DESTS = ("site:/a", "git:/b", "webhook:http://c", "site:/d")


def steps(*states: StepState) -> tuple[Step, ...]:
    return tuple(
        Step(uri=DESTS[i], position=i, state=state, since=T0 + timedelta(seconds=i))
        for i, state in enumerate(states)
    )


def executing(n: int, **kw: object) -> Saga:
    return Saga(state=SagaState.EXECUTING, destinations=DESTS[:n], **kw)  # type: ignore[arg-type]


def test_approved_starts_unless_the_approval_lapsed() -> None:
    assert next_command(Saga(state=SagaState.APPROVED, destinations=DESTS[:1]), ()) == StartExecution()
    lapsed = next_command(Saga(SagaState.APPROVED, DESTS[:1], approval_refusal="approval expired"), ())
    assert lapsed == Transition(
        SagaEvent.APPROVAL_LAPSED, "approval lapsed before publishing: approval expired"
    )


def test_every_pending_step_is_published_at_once() -> None:
    assert next_command(executing(3), steps(StepState.PENDING, StepState.DONE, StepState.PENDING)) == Publish(
        (DESTS[0], DESTS[2])
    )


def irreversible_last(*states: StepState, irreversible: frozenset[int]) -> tuple[Step, ...]:
    return tuple(
        Step(DESTS[i], i, state, T0 + timedelta(seconds=i), reversible=i not in irreversible)
        for i, state in enumerate(states)
    )


def test_irreversible_steps_wait_until_every_reversible_one_is_done() -> None:
    first = irreversible_last(
        StepState.PENDING, StepState.PENDING, StepState.PENDING, irreversible=frozenset({0})
    )
    assert next_command(executing(3), first) == Publish((DESTS[1], DESTS[2]))
    running = irreversible_last(
        StepState.PENDING, StepState.DONE, StepState.UNCERTAIN, irreversible=frozenset({0})
    )
    assert next_command(executing(3), running) == Transition(SagaEvent.STEP_UNCERTAIN)
    last = irreversible_last(StepState.PENDING, StepState.DONE, StepState.DONE, irreversible=frozenset({0}))
    assert next_command(executing(3), last) == Publish((DESTS[0],))


def test_a_reversible_failure_means_the_irreversible_steps_never_run() -> None:
    failed = irreversible_last(
        StepState.PENDING, StepState.DONE, StepState.FAILED, irreversible=frozenset({0})
    )
    assert next_command(executing(3), failed) == Compensate((DESTS[1],))
    undone = irreversible_last(
        StepState.PENDING, StepState.COMPENSATED, StepState.FAILED, irreversible=frozenset({0})
    )
    assert next_command(executing(3), undone) == Transition(SagaEvent.STEP_FAILED)


def test_a_compensated_reversible_leftover_runs_again_before_an_irreversible_step() -> None:
    left = irreversible_last(StepState.PENDING, StepState.COMPENSATED, irreversible=frozenset({0}))
    assert next_command(executing(2), left) == Publish((DESTS[1],))


def test_all_done_succeeds() -> None:
    assert next_command(executing(2), steps(StepState.DONE, StepState.DONE)) == Transition(
        SagaEvent.ALL_ACKED
    )


def test_a_failure_undoes_the_last_completed_first_then_fails() -> None:
    late_first = (
        Step(DESTS[0], 0, StepState.DONE, T0 + timedelta(seconds=5)),
        Step(DESTS[1], 1, StepState.DONE, T0 + timedelta(seconds=1)),
        Step(DESTS[2], 2, StepState.FAILED, T0),
        Step(DESTS[3], 3, StepState.PENDING, None),
    )
    assert next_command(executing(4), late_first) == Compensate((DESTS[0], DESTS[1]))
    undone = steps(StepState.COMPENSATED, StepState.COMPENSATED, StepState.FAILED, StepState.PENDING)
    assert next_command(executing(4), undone) == Transition(SagaEvent.STEP_FAILED)


def test_uncertain_waits_for_a_person_before_anything_else() -> None:
    got = next_command(executing(3), steps(StepState.DONE, StepState.UNCERTAIN, StepState.FAILED))
    assert got == Transition(SagaEvent.STEP_UNCERTAIN)


def test_a_failed_undo_waits_for_a_person() -> None:
    got = next_command(executing(2), steps(StepState.COMPENSATION_FAILED, StepState.FAILED))
    assert got == Transition(SagaEvent.COMPENSATION_FAILED)


def test_a_cancel_undoes_then_cancels() -> None:
    saga = executing(3, cancel_requested_by="olga")
    assert next_command(saga, steps(StepState.DONE, StepState.PENDING, StepState.PENDING)) == Compensate(
        (DESTS[0],)
    )
    done = next_command(saga, steps(StepState.COMPENSATED, StepState.PENDING, StepState.PENDING))
    assert done == Transition(SagaEvent.CANCELLED, "cancelled by olga")


def test_a_kept_step_is_not_undone_again() -> None:
    assert next_command(executing(2), steps(StepState.KEPT, StepState.FAILED)) == Transition(
        SagaEvent.STEP_FAILED
    )


def test_an_approver_lapse_undoes_then_returns_to_review() -> None:
    saga = executing(2, approver_lapsed="git:/b: not published: reviewer revoked")
    assert next_command(saga, steps(StepState.DONE, StepState.PENDING)) == Compensate((DESTS[0],))
    back = next_command(saga, steps(StepState.COMPENSATED, StepState.PENDING))
    assert back == Transition(SagaEvent.APPROVAL_LAPSED, "git:/b: not published: reviewer revoked")


def test_other_states_wait() -> None:
    for state in (
        SagaState.PREPARING,
        SagaState.READY_FOR_REVIEW,
        SagaState.EFFECT_UNKNOWN,
        SagaState.SUCCEEDED,
    ):
        assert isinstance(next_command(Saga(state, DESTS[:1]), steps(StepState.PENDING)), Wait)


def test_lease_exhaustion_is_honest() -> None:
    assert decider.on_lease_exhausted(SagaState.PREPARING) == (SagaEvent.PREPARATION_FAILED,)
    assert decider.on_lease_exhausted(SagaState.EXECUTING) == (SagaEvent.STEP_UNCERTAIN,)
    assert decider.on_lease_exhausted(SagaState.SUCCEEDED) == ()


def check_irreversible_last(command: Publish, cur: dict[str, StepState], reversible: list[bool]) -> None:
    """No irreversible step goes `pending → running` while a reversible one is not done."""
    assert command.uris, "a publish names at least one step"
    if all(reversible[DESTS.index(uri)] for uri in command.uris):
        return
    others = [state for uri, state in cur.items() if reversible[DESTS.index(uri)]]
    assert all(s is StepState.DONE for s in others), (
        "no irreversible step starts while a reversible one is not done"
    )
    assert all(not reversible[DESTS.index(uri)] for uri in command.uris), "never both at once"


PUBLISH_OUTCOMES = st.sampled_from(["ok", "error", "uncertain"])
UNDO_OUTCOMES = st.sampled_from(["ok", "ok", "failed"])


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=4),
    publish=st.lists(PUBLISH_OUTCOMES, min_size=16, max_size=16),
    undo=st.lists(UNDO_OUTCOMES, min_size=16, max_size=16),
    cancel_at=st.integers(min_value=0, max_value=6),
    reversible=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_random_executions_keep_the_rules(
    n: int, publish: list[str], undo: list[str], cancel_at: int, reversible: list[bool]
) -> None:
    state = SagaState.EXECUTING
    cur = {uri: StepState.PENDING for uri in DESTS[:n]}
    since: dict[str, datetime] = {}
    clock = T0
    completed: list[str] = []  # the order steps completed in
    undone: list[str] = []
    failed_seen = False
    cancel: str | None = None
    published_after_uncertain: set[str] = set()
    for round_no in range(40):
        if round_no == cancel_at:
            cancel = "olga"
        view = tuple(Step(u, i, cur[u], since.get(u), reversible[i]) for i, u in enumerate(DESTS[:n]))
        command = next_command(Saga(state, DESTS[:n], cancel_requested_by=cancel), view)
        if isinstance(command, Wait):
            break
        if isinstance(command, Transition):
            state = apply(state, command.event)
            if command.event is SagaEvent.ALL_ACKED:
                assert all(s is StepState.DONE for s in cur.values())
            if command.event is SagaEvent.STEP_FAILED:
                assert StepState.DONE not in cur.values(), "a failed saga keeps nothing published"
            continue
        if isinstance(command, Publish):
            assert not failed_seen, "nothing is published after a definite failure"
            assert cancel is None, "nothing is published after a cancel"
            check_irreversible_last(command, cur, reversible)
            for uri in command.uris:
                assert uri not in published_after_uncertain, "an uncertain step is never published again"
                outcome = publish.pop()
                clock += timedelta(seconds=1)
                if outcome == "ok":
                    cur[uri], since[uri] = StepState.DONE, clock
                    completed.append(uri)
                elif outcome == "error":
                    cur[uri], failed_seen = StepState.FAILED, True
                else:
                    cur[uri] = StepState.UNCERTAIN
                    published_after_uncertain.add(uri)
            continue
        assert isinstance(command, Compensate)
        live = [u for u in completed if cur[u] is StepState.DONE]
        assert list(command.uris) == list(reversed(live)), "undo the last completed first"
        for uri in command.uris:
            if undo.pop() == "ok":
                cur[uri] = StepState.COMPENSATED
                undone.append(uri)
            else:
                cur[uri] = StepState.COMPENSATION_FAILED
                break
    else:
        raise AssertionError("the decider did not settle within 40 rounds")
    assert state in (
        SagaState.SUCCEEDED,
        SagaState.FAILED,
        SagaState.CANCELLED,
        SagaState.EFFECT_UNKNOWN,
    ), state
    if state is SagaState.EFFECT_UNKNOWN:
        assert any(s in decider.UNSETTLED for s in cur.values()), (
            "effect-unknown only with a step a person settles"
        )

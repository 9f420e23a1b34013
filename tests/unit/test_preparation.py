"""The preparation decider (`sagas.preparation`): every rule, read from a plan and a round."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from sagas.preparation import (
    Failed,
    Node,
    OutOfRounds,
    Passed,
    Reported,
    Revise,
    Run,
    RunState,
    Situation,
    Start,
    Unchanged,
    Wait,
    decide,
    every_role,
    reviewers,
    revision,
)

W, Q, D, U, F = RunState.WAITING, RunState.QUEUED, RunState.DONE, RunState.UNCHANGED, RunState.FAILED

DEFAULT = (
    Node("researcher", "evidence"),
    Node("writer", "version", ("researcher",)),
    Node("reviewer", "verdict", ("writer",)),
)
# Two reviewers after the draft run in parallel; a second writer polishes after one of them.
TWO = (
    Node("research", "evidence"),
    Node("draft", "version", ("research",)),
    Node("fact", "verdict", ("draft",)),
    Node("style", "verdict", ("draft",)),
    Node("polish", "version", ("fact",)),
    Node("final", "verdict", ("polish",)),
)


def runs(**states: RunState | tuple[RunState, str]) -> dict[str, Run]:
    """Runs by role: a state, or (DONE, verdict) for a reviewer."""
    out: dict[str, Run] = {}
    for role, value in states.items():
        if isinstance(value, tuple):
            state, verdict = value
            out[role] = Run(role, state, verdict="pass" if verdict == "pass" else "fail")
        else:
            out[role] = Run(role, value)
    return out


def at(plan: tuple[Node, ...], **states: RunState | tuple[RunState, str]) -> object:
    return decide(plan, Situation(runs(**states)))


def test_a_new_round_starts_the_roles_with_nothing_before_them() -> None:
    assert at(DEFAULT, researcher=W, writer=W, reviewer=W) == Start(("researcher",))
    assert at(DEFAULT, researcher=D, writer=W, reviewer=W) == Start(("writer",))
    assert at(DEFAULT, researcher=D, writer=D, reviewer=W) == Start(("reviewer",))


def test_roles_in_flight_are_waited_for() -> None:
    assert at(DEFAULT, researcher=Q, writer=W, reviewer=W) == Wait()
    assert at(DEFAULT, researcher=D, writer=D, reviewer=Q) == Wait()


def test_a_failed_run_fails_the_preparation_with_its_reason_first() -> None:
    failing = {**runs(researcher=D, writer=U), "reviewer": Run("reviewer", F, reason="review stopped: x")}
    assert decide(DEFAULT, Situation(failing)) == Failed("reviewer", "review stopped: x")
    quiet = {"researcher": Run("researcher", F)}
    assert decide(DEFAULT, Situation(quiet)) == Failed("researcher", "the researcher role failed")


def test_a_writer_that_changed_nothing_sends_the_saga_back_unchanged() -> None:
    assert at(DEFAULT, writer=U, reviewer=W) == Unchanged("writer")


def test_every_role_done_and_passing_is_passed() -> None:
    assert at(DEFAULT, researcher=D, writer=D, reviewer=(D, "pass")) == Passed()


def test_roles_outside_the_round_count_as_done() -> None:
    # An edit: the reviewers alone, started at once although research and the writer did not run.
    assert at(DEFAULT, reviewer=W) == Start(("reviewer",))
    assert at(TWO, fact=W, style=W, final=W) == Start(("fact", "style", "final"))
    # A rejection: the writers and everything after them; the writer starts at once.
    assert at(DEFAULT, writer=W, reviewer=W) == Start(("writer",))


def test_parallel_reviewers_start_together_and_all_must_pass() -> None:
    every = dict.fromkeys(every_role(TWO), W)
    assert at(TWO, **{**every, "research": D, "draft": D}) == Start(("fact", "style"))
    # One has failed, the other is still at work: wait for both verdicts.
    assert at(TWO, research=D, draft=D, fact=(D, "fail"), style=Q, polish=W, final=W) == Wait()
    done = at(TWO, research=D, draft=D, fact=(D, "pass"), style=(D, "fail"), polish=D, final=(D, "pass"))
    assert done == Revise(("style",), ("draft", "fact", "style", "polish", "final"))


def test_a_failed_verdict_blocks_the_roles_after_it() -> None:
    # `polish` runs after `fact`, which failed: it is never started; the round ends in a revision.
    now = at(TWO, research=D, draft=D, fact=(D, "fail"), style=(D, "pass"), polish=W, final=W)
    assert now == Revise(("fact",), revision(TWO))
    # After a passing `fact`, `polish` starts although `style` (not before it) failed.
    now = at(TWO, research=D, draft=D, fact=(D, "pass"), style=(D, "fail"), polish=W, final=W)
    assert now == Start(("polish",))


def test_a_failed_review_of_a_persons_text_is_reported_never_rewritten() -> None:
    situation = Situation(runs(reviewer=(D, "fail")), person_text=True)
    assert decide(DEFAULT, situation) == Reported(("reviewer",))


def test_out_of_revision_rounds_fails_the_preparation() -> None:
    failed = runs(researcher=D, writer=D, reviewer=(D, "fail"))
    assert decide(DEFAULT, Situation(failed, revisions_done=1, max_revisions=2)) == Revise(
        ("reviewer",), ("writer", "reviewer")
    )
    assert decide(DEFAULT, Situation(failed, revisions_done=2, max_revisions=2)) == OutOfRounds(("reviewer",))
    assert decide(DEFAULT, Situation(failed, max_revisions=0)) == OutOfRounds(("reviewer",))


def test_the_round_choosers() -> None:
    assert every_role(TWO) == ("research", "draft", "fact", "style", "polish", "final")
    assert revision(TWO) == ("draft", "fact", "style", "polish", "final")
    assert reviewers(TWO) == ("fact", "style", "final")
    assert revision(DEFAULT) == ("writer", "reviewer") and reviewers(DEFAULT) == ("reviewer",)


@st.composite
def plans(draw: st.DrawFn) -> tuple[Node, ...]:
    """A random valid pipeline: research first, then writers and reviewers, each after earlier roles."""
    nodes = [Node("r0", "evidence")]
    for i in range(1, draw(st.integers(2, 7))):
        produces = "version" if i == 1 else draw(st.sampled_from(["version", "verdict", "evidence"]))
        after = draw(st.lists(st.sampled_from([n.name for n in nodes]), min_size=1, max_size=3, unique=True))
        nodes.append(Node(f"r{i}", produces, tuple(after)))  # type: ignore[arg-type]
    return tuple(nodes)


@settings(max_examples=50, deadline=None)
@given(plans())
def test_every_role_done_and_passing_is_always_passed(plan: tuple[Node, ...]) -> None:
    done = {n.name: Run(n.name, D, verdict="pass" if n.produces == "verdict" else None) for n in plan}
    assert decide(plan, Situation(done)) == Passed()


@settings(max_examples=100, deadline=None)
@given(plans(), st.data())
def test_a_started_role_is_waiting_and_everything_before_it_is_done(
    plan: tuple[Node, ...], data: st.DataObject
) -> None:
    states = {n.name: data.draw(st.sampled_from([W, Q, D])) for n in plan}
    now = {
        n.name: Run(
            n.name,
            states[n.name],
            verdict="pass" if states[n.name] is D and n.produces == "verdict" else None,
        )
        for n in plan
    }
    command = decide(plan, Situation(now))
    by_name = {n.name: n for n in plan}
    if isinstance(command, Start):
        assert command.roles
        for role in command.roles:
            assert states[role] is W
            assert all(states[a] is D for a in by_name[role].after)
    elif isinstance(command, Passed):
        assert all(s is D for s in states.values())
    else:
        assert command == Wait() and Q in states.values()


def test_the_decider_loads_no_adapter() -> None:
    code = (
        "import sys, sagas.preparation, orchestrator.core.pipeline; "
        "print(','.join(m for m in ('sqlalchemy', 'sqlmodel', 'celery', 'httpx') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""

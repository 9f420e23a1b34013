"""What a preparing saga does next: `decide(plan, state) -> Command`. Pure.

The roles of a declared pipeline (`orchestrator.core.pipeline`) prepare a
saga in rounds. A round names the roles that run in it: every role at submit
and on a retry; the writers and everything after them when a review fails or
a person rejects; the reviewers alone when a person edits. A role outside the
round counts as done. Within a round, a role runs once every role it runs
after is done, and none of them is a reviewer that failed: reviewers after the
same role run in parallel, and all must pass.

No handler names the next role: each records its own outcome and asks this
module, in the saga's locked transaction, what follows. The rules, in order:

* a role failed (it stopped, its budget ran out): the preparation fails with
  its reason;
* a writer could not change the text the round asked it to change: the saga
  goes back to its reviewers with the text as it was (`Unchanged`);
* roles whose predecessors are done are started (`Start`), several at once;
* roles still in flight: wait;
* every role is done: `Passed` if no reviewer failed; otherwise a person's
  text is reported as it is (`Reported`), the writer revises (`Revise`), or,
  out of revision rounds, the preparation fails (`OutOfRounds`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Produces = Literal["evidence", "version", "verdict"]


class RunState(StrEnum):
    WAITING = "waiting"  # in the round, not started
    QUEUED = "queued"  # its work is sent
    DONE = "done"
    UNCHANGED = "unchanged"  # a writer that could not act on what it was asked
    FAILED = "failed"


@dataclass(frozen=True)
class Node:
    """A pipeline role as the decider sees it."""

    name: str
    produces: Produces
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Run:
    """One role's run in the current round."""

    role: str
    state: RunState
    verdict: Literal["pass", "fail"] | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Situation:
    """The round in progress: its runs (one per role in the round), and what bounds it."""

    runs: Mapping[str, Run]
    revisions_done: int = 0
    max_revisions: int = 2
    # The head version's text comes from a person: it is reported, never rewritten.
    person_text: bool = False


# -- commands ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    roles: tuple[str, ...]


@dataclass(frozen=True)
class Wait:
    pass


@dataclass(frozen=True)
class Passed:
    pass


@dataclass(frozen=True)
class Unchanged:
    role: str


@dataclass(frozen=True)
class Failed:
    role: str
    reason: str


@dataclass(frozen=True)
class Reported:
    """A person's text failed review: the approver reads the findings."""

    failed: tuple[str, ...]


@dataclass(frozen=True)
class Revise:
    """The writers revise; `rerun` is the next round's roles."""

    failed: tuple[str, ...]
    rerun: tuple[str, ...]


@dataclass(frozen=True)
class OutOfRounds:
    failed: tuple[str, ...]


Command = Start | Wait | Passed | Unchanged | Failed | Reported | Revise | OutOfRounds


# -- which roles a round holds ------------------------------------------------------------


def every_role(plan: Iterable[Node]) -> tuple[str, ...]:
    """A new preparation (submit, retry): all roles."""
    return tuple(n.name for n in plan)


def revision(plan: Iterable[Node]) -> tuple[str, ...]:
    """A revision (failed review, a person's rejection): the writers and every role after them."""
    nodes = tuple(plan)
    chosen = {n.name for n in nodes if n.produces == "version"}
    for node in nodes:  # declaration order is a topological order
        if any(a in chosen for a in node.after):
            chosen.add(node.name)
    return tuple(n.name for n in nodes if n.name in chosen)


def reviewers(plan: Iterable[Node]) -> tuple[str, ...]:
    """A person's edit: the reviewers read the new text; nobody rewrites it."""
    return tuple(n.name for n in plan if n.produces == "verdict")


# -- the decision ---------------------------------------------------------------------------


def decide(plan: tuple[Node, ...], now: Situation) -> Command:
    runs = now.runs
    in_round = [n for n in plan if n.name in runs]
    for node in in_round:
        run = runs[node.name]
        if run.state is RunState.FAILED:
            return Failed(node.name, run.reason or f"the {node.name} role failed")
    for node in in_round:
        if runs[node.name].state is RunState.UNCHANGED:
            return Unchanged(node.name)
    ready = tuple(n.name for n in in_round if runs[n.name].state is RunState.WAITING and _clear(n, runs))
    if ready:
        return Start(ready)
    if any(runs[n.name].state is RunState.QUEUED for n in in_round):
        return Wait()
    failed = tuple(n.name for n in in_round if runs[n.name].verdict == "fail")
    if not failed:
        return Passed()
    if now.person_text:
        return Reported(failed)
    if now.revisions_done >= now.max_revisions:
        return OutOfRounds(failed)
    return Revise(failed, revision(plan))


def _clear(node: Node, runs: Mapping[str, Run]) -> bool:
    """Every role `node` runs after is outside the round or done, and none of them failed review."""
    for name in node.after:
        run = runs.get(name)
        if run is None:
            continue
        if run.state is not RunState.DONE or run.verdict == "fail":
            return False
    return True


__all__ = [
    "Command",
    "Failed",
    "Node",
    "OutOfRounds",
    "Passed",
    "Reported",
    "Revise",
    "Run",
    "RunState",
    "Situation",
    "Start",
    "Unchanged",
    "Wait",
    "decide",
    "every_role",
    "reviewers",
    "revision",
]

"""A small state graph with a checkpointer and an approval interrupt, no dependency. No I/O.

The in-repository framework of `pressroom compare --framework local`. It has
the three things the comparison needs from a graph framework, with the
semantics LangGraph gives them:

* nodes are functions of the state returning a partial update (keys
  overwrite); plain edges and conditional edges (a router over the state
  naming the next node) lead from node to node, `END` stops;
* a checkpointer keeps, per thread, the state after every step and the node
  to run next; `invoke(None, thread)` resumes from the last checkpoint, so a
  node that raised (a process killed mid-step) runs again from there;
* `interrupt(value)` inside a node pauses the run at that node; the next
  `invoke(Resume(answer), thread)` runs the node again and `interrupt`
  returns `answer`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

START = "__start__"
END = "__end__"

State = dict[str, Any]
Node = Callable[[State], Mapping[str, Any]]
Router = Callable[[State], str]


class GraphInterrupt(Exception):  # noqa: N818  (a signal, as LangGraph names it)
    """Raised by `interrupt` when no answer is waiting: the run pauses at the node."""

    def __init__(self, value: Any) -> None:
        super().__init__("interrupted")
        self.value = value


class GraphError(Exception):
    """A graph that cannot run: an unknown node, a router naming no declared target, a step limit."""


@dataclass(frozen=True)
class Resume:
    """The answer to a pending `interrupt`."""

    value: Any


_resume: ContextVar[tuple[bool, Any]] = ContextVar("resume", default=(False, None))


def interrupt(value: Any) -> Any:
    """Pause here until resumed; then return the resume answer."""
    waiting, answer = _resume.get()
    if not waiting:
        raise GraphInterrupt(value)
    _resume.set((False, None))
    return answer


@dataclass(frozen=True)
class Checkpoint:
    values: State
    next: str  # the node to run next, END when the run finished
    step: int
    interrupt: Any = None


@dataclass
class MemoryCheckpointer:
    """Checkpoints per thread; the object a restarted process would reopen."""

    threads: dict[str, list[Checkpoint]] = field(default_factory=dict)

    def put(self, thread: str, checkpoint: Checkpoint) -> None:
        self.threads.setdefault(thread, []).append(checkpoint)

    def latest(self, thread: str) -> Checkpoint | None:
        saved = self.threads.get(thread)
        return saved[-1] if saved else None


@dataclass(frozen=True)
class Branch:
    router: Router
    targets: tuple[str, ...]


class StateGraph:
    """Nodes and edges; `compile(checkpointer)` makes a runnable graph."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: list[tuple[str, str]] = []
        self.branches: dict[str, Branch] = {}

    def add_node(self, name: str, node: Node) -> None:
        self.nodes[name] = node

    def add_edge(self, source: str, target: str) -> None:
        self.edges.append((source, target))

    def add_conditional_edges(self, source: str, router: Router, targets: list[str]) -> None:
        self.branches[source] = Branch(router, tuple(targets))

    def compile(self, checkpointer: MemoryCheckpointer, *, max_steps: int = 50) -> CompiledGraph:
        known = set(self.nodes) | {START, END}
        named = {n for edge in self.edges for n in edge}
        named |= {t for b in self.branches.values() for t in b.targets} | set(self.branches)
        if named - known:
            raise GraphError(f"edges name unknown nodes: {', '.join(sorted(named - known))}")
        return CompiledGraph(self, checkpointer, max_steps)


class CompiledGraph:
    def __init__(self, graph: StateGraph, checkpointer: MemoryCheckpointer, max_steps: int) -> None:
        self.graph = graph
        self.checkpointer = checkpointer
        self.max_steps = max_steps

    def _after(self, node: str, state: State) -> str:
        branch = self.graph.branches.get(node)
        if branch is not None:
            target = branch.router(state)
            if target not in branch.targets:
                raise GraphError(f"router of {node} chose {target!r}, not one of {branch.targets}")
            return target
        targets = [t for s, t in self.graph.edges if s == node]
        if len(targets) != 1:
            raise GraphError(f"{node} has {len(targets)} outgoing edges; one expected")
        return targets[0]

    def invoke(self, given: Mapping[str, Any] | Resume | None, thread: str) -> State:
        """Run from `given` (a new input), or resume the thread's last checkpoint."""
        last = self.checkpointer.latest(thread)
        if isinstance(given, Mapping):
            # A new input on a used thread keeps the keys it does not name (LangGraph's channels do too).
            state: State = copy.deepcopy({**(last.values if last else {}), **given})
            step = (last.step + 1) if last else 0
            nxt = self._after(START, state)
            self.checkpointer.put(thread, Checkpoint(copy.deepcopy(state), nxt, step))
        elif last is None:
            raise GraphError(f"thread {thread} has no checkpoint to resume")
        else:
            state, nxt, step = copy.deepcopy(last.values), last.next, last.step
        token = _resume.set((True, given.value) if isinstance(given, Resume) else (False, None))
        try:
            return self._run(thread, state, nxt, step)
        finally:
            _resume.reset(token)

    def _run(self, thread: str, state: State, nxt: str, step: int) -> State:
        for _ in range(self.max_steps):
            if nxt == END:
                return state
            try:
                update = self.graph.nodes[nxt](copy.deepcopy(state))
            except GraphInterrupt as paused:
                self.checkpointer.put(thread, Checkpoint(copy.deepcopy(state), nxt, step, paused.value))
                return {**state, "__interrupt__": paused.value}
            state = {**state, **copy.deepcopy(dict(update))}
            step += 1
            nxt = self._after(nxt, state)
            self.checkpointer.put(thread, Checkpoint(copy.deepcopy(state), nxt, step))
        raise GraphError(f"no end after {self.max_steps} steps")

    def get_state(self, thread: str) -> Checkpoint | None:
        return self.checkpointer.latest(thread)

    def shape(self) -> dict[str, Any]:
        """Nodes, plain edges and conditional edges, as the comparison reports them."""
        conditional = [(s, t) for s, b in self.graph.branches.items() for t in b.targets]
        return graph_shape(list(self.graph.nodes), self.graph.edges, conditional)


def graph_shape(
    nodes: list[str], edges: list[tuple[str, str]], conditional: list[tuple[str, str]]
) -> dict[str, Any]:
    """The counted shape of a graph, `START`/`END` not counted as nodes."""
    return {
        "nodes": sorted(n for n in nodes if n not in (START, END)),
        "edges": sorted(f"{s} -> {t}" for s, t in edges),
        "conditional_edges": sorted(f"{s} -> {t}" for s, t in conditional),
    }


__all__ = [
    "END",
    "START",
    "Checkpoint",
    "CompiledGraph",
    "GraphError",
    "GraphInterrupt",
    "MemoryCheckpointer",
    "Resume",
    "StateGraph",
    "graph_shape",
    "interrupt",
]

"""One small interface over the two graph frameworks the comparison runs.

A `GraphRunner` runs one thread of a compiled contract graph: `start` a new
proposal, `resume` a paused interrupt with an answer, `proceed` from the last
checkpoint after an interruption, `snapshot` the checkpointed state and the
node to run next, and `restart` (a new compiled graph over the same
checkpointer: what a restarted process builds). `LocalRunner` is the
in-repository graph; `LangGraphRunner` is LangGraph with its `InMemorySaver`
checkpointer and `interrupt`, imported only when asked for.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from evaluation import state_graph as local
from evaluation.contract_graph import ContractNodes, ContractState, wire
from evaluation.faults import Bench

THREAD = "saga"


class GraphRunner(Protocol):
    nodes: ContractNodes

    def start(self, proposal: dict[str, Any]) -> dict[str, Any]: ...

    def resume(self, answer: Any) -> dict[str, Any]: ...

    def proceed(self) -> dict[str, Any]: ...

    def snapshot(self) -> tuple[dict[str, Any], str]: ...

    def restart(self) -> None: ...

    def shape(self) -> dict[str, Any]: ...


Wiring = Callable[[Any, ContractNodes, str], None]


def contract_wiring(builder: Any, nodes: ContractNodes, start: str) -> None:
    wire(builder, nodes.nodes(), start)


class LocalRunner:
    """The contract on `state_graph.StateGraph` (no dependency)."""

    def __init__(self, bench: Bench, wiring: Wiring = contract_wiring) -> None:
        self.nodes = ContractNodes(bench, local.interrupt)
        self._wiring = wiring
        self.checkpointer = local.MemoryCheckpointer()
        self.restart()

    def restart(self) -> None:
        graph = local.StateGraph()
        self._wiring(graph, self.nodes, local.START)
        self.graph = graph.compile(self.checkpointer)

    def start(self, proposal: dict[str, Any]) -> dict[str, Any]:
        return self.graph.invoke({"proposal": proposal}, THREAD)

    def resume(self, answer: Any) -> dict[str, Any]:
        return self.graph.invoke(local.Resume(answer), THREAD)

    def proceed(self) -> dict[str, Any]:
        return self.graph.invoke(None, THREAD)

    def snapshot(self) -> tuple[dict[str, Any], str]:
        saved = self.graph.get_state(THREAD)
        return (dict(saved.values), saved.next) if saved else ({}, local.END)

    def shape(self) -> dict[str, Any]:
        return self.graph.shape()


class LangGraphRunner:
    """The contract on LangGraph: `StateGraph(ContractState)`, `InMemorySaver`, `interrupt`."""

    def __init__(self, bench: Bench, wiring: Wiring = contract_wiring) -> None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.types import interrupt

        self.nodes = ContractNodes(bench, interrupt)
        self._wiring = wiring
        self.saver = InMemorySaver()
        self.config: Any = {"configurable": {"thread_id": THREAD}}
        self.restart()

    def restart(self) -> None:
        from langgraph.graph import START, StateGraph

        builder: Any = StateGraph(ContractState)
        self._wiring(builder, self.nodes, START)
        self.graph = builder.compile(checkpointer=self.saver)

    def start(self, proposal: dict[str, Any]) -> dict[str, Any]:
        return dict(self.graph.invoke({"proposal": proposal}, self.config))

    def resume(self, answer: Any) -> dict[str, Any]:
        from langgraph.types import Command

        return dict(self.graph.invoke(Command(resume=answer), self.config))

    def proceed(self) -> dict[str, Any]:
        return dict(self.graph.invoke(None, self.config))

    def snapshot(self) -> tuple[dict[str, Any], str]:
        saved = self.graph.get_state(self.config)
        return dict(saved.values), (saved.next[0] if saved.next else local.END)

    def shape(self) -> dict[str, Any]:
        drawn = self.graph.get_graph()
        plain = [(e.source, e.target) for e in drawn.edges if not e.conditional]
        conditional = [(e.source, e.target) for e in drawn.edges if e.conditional]
        return local.graph_shape(list(drawn.nodes), plain, conditional)


def langgraph_install() -> dict[str, Any]:
    """The exact LangGraph version, the pin this project declares and where it is installed.

    Raises `ImportError` when LangGraph cannot be imported.
    """
    import langgraph.graph  # noqa: F401  (the import is the check)

    version = metadata.version("langgraph")
    location = Path(str(metadata.distribution("langgraph").locate_file(""))).resolve()
    pins = [
        r.split(";")[0].strip() for r in metadata.requires("pressroom") or [] if r.startswith("langgraph")
    ]
    return {
        "version": version,
        "requirement": pins[0] if pins else None,
        "install_scope": "optional extra `compare` of pressroom (not a default dependency), "
        "installed in the project's environment",
        "environment": sys.prefix,
        "location": str(location),
        "in_project_environment": location.is_relative_to(Path(sys.prefix).resolve()),
    }


RUNNERS: dict[str, Callable[[Bench, Wiring], GraphRunner]] = {
    "local": LocalRunner,
    "langgraph": LangGraphRunner,
}

__all__ = ["RUNNERS", "GraphRunner", "LangGraphRunner", "LocalRunner", "contract_wiring", "langgraph_install"]

"""A deliberately broken contract graph: it executes the proposed tool before validating it.

`broken_wiring` wires the same nodes as `evaluation.contract_graph.wire`,
plus `execute_first` between `propose` and `validate`, which hands the raw
arguments to the executor unchecked. The comparison must notice: the
schema-failure column stops being equal.
"""

from __future__ import annotations

from typing import Any

from evaluation.contract_graph import END, ContractNodes, after_authorize, after_validate
from orchestrator.harness.spec import ToolContext


def broken_wiring(builder: Any, nodes: ContractNodes, start: str) -> None:
    def execute_first(state: dict[str, Any]) -> dict[str, Any]:
        nodes.steps["execute_first"] += 1
        spec = nodes.bench.registry.get(str(state.get("tool")))
        raw = (state.get("proposal") or {}).get("arguments")
        if spec is not None and spec.executor is not None and isinstance(raw, dict):
            ctx = ToolContext(saga_id=nodes.bench.saga_id, actor="broken", idempotency_key=None, call_id="")
            spec.executor(ctx, spec.input_model.model_construct(**raw))
        return {}

    for name, node in nodes.nodes().items():
        builder.add_node(name, node)
    builder.add_node("execute_first", execute_first)
    builder.add_edge(start, "propose")
    builder.add_edge("propose", "execute_first")
    builder.add_edge("execute_first", "validate")
    builder.add_conditional_edges("validate", after_validate, ["authorize", END])
    builder.add_conditional_edges("authorize", after_authorize, ["execute", "await_approval", END])
    builder.add_edge("await_approval", "authorize")
    builder.add_edge("execute", END)

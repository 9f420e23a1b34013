"""Evaluation and evidence, outside the product core.

Fault rigs and scenarios (`faults`, `fault_scenarios`), the in-memory
`HarnessStore` adapter they run on (`memory_store`), `pressroom evidence
harness` (`evidence`), `pressroom eval` (`evaluate`, `eval_run`,
`eval_probes`, `eval_dimensions`, `eval_measures`, `eval_report`) and
`pressroom compare` (`compare`, `compare_scenarios`, `contract_graph`,
`graph_runners`, `state_graph`). The CLI imports these lazily; nothing under
`orchestrator/harness`, `sagas`, `outbox`, `roles` or `telemetry` imports
this package.
"""

"""Evaluation and evidence, outside the product core.

Fault rigs and scenarios (`faults`, `fault_scenarios`), the in-memory
`HarnessStore` adapter they run on (`memory_store`), `pressroom evidence
harness` (`evidence`) and `pressroom eval` (`evaluate`, `eval_measures`,
`eval_report`). The CLI imports these lazily; nothing under
`orchestrator/harness`, `sagas`, `outbox`, `roles` or `telemetry` imports
this package.
"""

"""Pressroom telemetry: tracer and meter setup, span helpers, context propagation, rendering.

    names        span names, attribute keys, metric names (constants)
    spans        the action span, its four phases, the approval wait, attribute hygiene
    propagation  W3C context through outbox rows and message headers; messaging spans
    metrics      saga, approval, outbox and destination instruments
    setup        tracer and meter providers from OTEL_* (SDK), after-fork, shutdown
    export       the JSON-lines span file exporter; exporters by OTEL_*_EXPORTER name
    render       the phase waterfall and span tree for `pressroom trace`

The first four use the OpenTelemetry API only. `setup` and `export` (the SDK)
and `render` (rich) load on first use of one of their names, so the harness
can import span helpers without pulling in exporters.

Nothing here imports orchestrator, sagas, outbox or roles.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from telemetry import names
from telemetry.metrics import (
    record_approval_wait,
    record_destination_latency,
    record_effect_unknown,
    record_outbox_lag,
    record_saga_finished,
    set_saga_state_counter,
)
from telemetry.propagation import (
    create_span,
    extract_context,
    inject_context,
    process_span,
    send_span,
    settle_span,
    system_for_broker_url,
)
from telemetry.spans import (
    ActionAttrs,
    action_span,
    annotate,
    approval_wait_span,
    mark_error,
    phase,
    safe_attributes,
    to_ns,
    tracer,
)

if TYPE_CHECKING:
    from telemetry.render import phase_durations, read_span_file, render_waterfall, spans_for_saga
    from telemetry.setup import (
        TelemetrySettings,
        configure_after_fork,
        configure_metrics,
        configure_tracing,
        install_in_memory,
        memory_exporter,
        shutdown,
    )

_LAZY = {
    "TelemetrySettings": "telemetry.setup",
    "configure_after_fork": "telemetry.setup",
    "configure_metrics": "telemetry.setup",
    "configure_tracing": "telemetry.setup",
    "install_in_memory": "telemetry.setup",
    "memory_exporter": "telemetry.setup",
    "shutdown": "telemetry.setup",
    "phase_durations": "telemetry.render",
    "read_span_file": "telemetry.render",
    "render_waterfall": "telemetry.render",
    "spans_for_saga": "telemetry.render",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'telemetry' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ActionAttrs",
    "TelemetrySettings",
    "action_span",
    "annotate",
    "approval_wait_span",
    "configure_after_fork",
    "configure_metrics",
    "configure_tracing",
    "create_span",
    "extract_context",
    "inject_context",
    "install_in_memory",
    "mark_error",
    "memory_exporter",
    "names",
    "phase",
    "phase_durations",
    "process_span",
    "read_span_file",
    "record_approval_wait",
    "record_destination_latency",
    "record_effect_unknown",
    "record_outbox_lag",
    "record_saga_finished",
    "render_waterfall",
    "safe_attributes",
    "send_span",
    "set_saga_state_counter",
    "settle_span",
    "shutdown",
    "spans_for_saga",
    "system_for_broker_url",
    "to_ns",
    "tracer",
]

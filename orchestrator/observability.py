"""Tracing set-up for an entry point, from Settings and the OTEL_* variables.

One function so that every process (CLI, relay, workers, API, MCP) configures
the same way: the standard variables decide the exporter;
`PRESSROOM_TRACE_FILE` names the JSON-lines file for `OTEL_TRACES_EXPORTER=file`.
"""

from __future__ import annotations

from orchestrator.config import Settings, environ_snapshot


def start_tracing(service: str, settings: Settings | None = None, *, after_fork: bool = False) -> None:
    from telemetry.setup import configure_after_fork, configure_tracing

    trace_file = (settings or Settings()).trace_file
    if after_fork:
        configure_after_fork(service, env=environ_snapshot(), file_path=trace_file)
    else:
        configure_tracing(service, env=environ_snapshot(), file_path=trace_file)


__all__ = ["start_tracing"]

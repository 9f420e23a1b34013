"""Tracing set-up for an entry point, from Settings and the OTEL_* variables.

One function so that every process (CLI, relay, workers, API, MCP) configures
the same way: the standard variables decide the exporter;
`PRESSROOM_TRACE_FILE` names the JSON-lines file for `OTEL_TRACES_EXPORTER=file`.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from orchestrator.core.config import Settings, environ_snapshot
from orchestrator.light_config import telemetry_asked
from orchestrator.store.tables import SagaRow


def start_tracing(service: str, settings: Settings | None = None, *, after_fork: bool = False) -> None:
    """Traces per OTEL_TRACES_EXPORTER, metrics per OTEL_METRICS_EXPORTER (both off when unset)."""
    env = environ_snapshot()
    if not after_fork and not telemetry_asked(env):
        return  # nothing to export: the SDK is not even imported (a CLI read starts faster)
    from telemetry.setup import configure_after_fork, configure_metrics, configure_tracing

    trace_file = (settings or Settings()).trace_file
    if after_fork:
        configure_after_fork(service, env=env, file_path=trace_file)
    else:
        configure_tracing(service, env=env, file_path=trace_file)
        configure_metrics(service, env=env)


def count_sagas_by_state(engine: Engine) -> Callable[[], dict[str, int]]:
    """A callback for the `sagas by state` gauge (the relay registers it: one reader)."""

    def count() -> dict[str, int]:
        with Session(engine) as s:
            rows = s.exec(select(SagaRow.state, func.count()).group_by(SagaRow.state)).all()
            return {state: int(n) for state, n in rows}

    return count


__all__ = ["count_sagas_by_state", "start_tracing"]

"""Tracer and meter providers for one process, from the standard OTEL_* variables.

Telemetry is off unless configured: with OTEL_TRACES_EXPORTER (or
OTEL_METRICS_EXPORTER) unset nothing is exported, and OTEL_SDK_DISABLED=true
pins the API's no-op tracer. The variables arrive as a mapping (the
composition root passes `orchestrator.core.config.environ_snapshot()`), since only
the config module reads the environment; the SDK still reads its own finer settings (endpoint,
headers, sampler, OTEL_RESOURCE_ATTRIBUTES) itself.

    OTEL_TRACES_EXPORTER   otlp | console | memory | file | none  (comma-separated)
    OTEL_METRICS_EXPORTER  otlp | console | none
    OTEL_EXPORTER_OTLP[_TRACES|_METRICS]_PROTOCOL  grpc (default) | http/protobuf
    OTEL_SERVICE_NAME      overrides the service name the caller gives

`file` appends one JSON line per finished span to the path the caller passes
(export.py). Console output goes to stderr: stdout belongs to `--json`.

A collector that is down or never answers never holds a process up, and a
failing export makes one warning line (`telemetry.bounded`).

The providers are handed to `spans` and `metrics`, which use them before the
global ones; the global providers are set once per process, for other
libraries' instrumentation.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from opentelemetry import metrics as metrics_api
from opentelemetry import trace as trace_api
from opentelemetry.environment_variables import OTEL_METRICS_EXPORTER, OTEL_TRACES_EXPORTER
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    OTEL_SDK_DISABLED,
    OTEL_SERVICE_NAME,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from telemetry import metrics, spans
from telemetry.bounded import export_timeout, reported, stop_bounded
from telemetry.export import JsonLinesSpanExporter, build_metric_reader, build_span_exporter

TRACE_EXPORTERS: Final = frozenset({"otlp", "console", "memory", "file", "none"})
METRIC_EXPORTERS: Final = frozenset({"otlp", "console", "none"})
PROTOCOLS: Final = frozenset({"grpc", "http/protobuf"})


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """What the OTEL_* variables ask of this process."""

    disabled: bool = False
    traces_exporters: tuple[str, ...] = ()
    metrics_exporters: tuple[str, ...] = ()
    traces_protocol: str = "grpc"
    metrics_protocol: str = "grpc"
    service_name: str | None = None

    @classmethod
    def from_env_mapping(cls, env: Mapping[str, str]) -> TelemetrySettings:
        """Parse the variables; an unknown exporter or protocol raises ValueError."""
        protocol = env.get(OTEL_EXPORTER_OTLP_PROTOCOL, "").strip() or "grpc"
        return cls(
            disabled=env.get(OTEL_SDK_DISABLED, "").strip().lower() == "true",
            traces_exporters=parse_exporters(env.get(OTEL_TRACES_EXPORTER, ""), TRACE_EXPORTERS),
            metrics_exporters=parse_exporters(env.get(OTEL_METRICS_EXPORTER, ""), METRIC_EXPORTERS),
            traces_protocol=_protocol(env.get(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "").strip() or protocol),
            metrics_protocol=_protocol(env.get(OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, "").strip() or protocol),
            service_name=env.get(OTEL_SERVICE_NAME, "").strip() or None,
        )


def parse_exporters(value: str, known: frozenset[str]) -> tuple[str, ...]:
    """`"otlp, console"` -> `("otlp", "console")`; `none` and blanks drop out."""
    chosen = tuple(dict.fromkeys(part.strip().lower() for part in value.split(",") if part.strip()))
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise ValueError(f"unknown exporter {', '.join(unknown)}; choose from {', '.join(sorted(known))}")
    return tuple(name for name in chosen if name != "none")


def _protocol(value: str) -> str:
    if value not in PROTOCOLS:
        raise ValueError(f"unsupported OTLP protocol {value!r}; choose grpc or http/protobuf")
    return value


# -- process state ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TracingRequest:
    service_name: str
    exporter: str | None = None
    file_path: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    set_global: bool = True


@dataclass(frozen=True, slots=True)
class _MetricsRequest:
    service_name: str
    reader: MetricReader | None
    env: Mapping[str, str]
    set_global: bool


@dataclass
class _State:
    """What this process configured: the providers, and how (replayed after a fork)."""

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    memory: InMemorySpanExporter | None = None
    exporters: list[SpanExporter] = field(default_factory=list)
    tracing: _TracingRequest | None = None
    metrics: _MetricsRequest | None = None
    global_tracer_set: bool = False
    global_meter_set: bool = False
    atexit_registered: bool = False


_state = _State()
_lock = threading.RLock()


def configure_tracing(
    service_name: str,
    *,
    exporter: str | None = None,
    force: bool = False,
    file_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    set_global: bool = True,
) -> TracerProvider | None:
    """Install this process's tracer provider; None when tracing is off or disabled.

    `exporter` (same names as OTEL_TRACES_EXPORTER) wins over `env`. A second
    call returns the installed provider unless `force`, which flushes and
    replaces it.
    """
    with _lock:
        if _state.tracer_provider is not None and not force:
            return _state.tracer_provider
        settings = TelemetrySettings.from_env_mapping(env or {})
        chosen = settings.traces_exporters if exporter is None else parse_exporters(exporter, TRACE_EXPORTERS)
        if settings.disabled:
            chosen = ()
        # Built before the old provider goes, so a bad configuration leaves it in place.
        given = env or {}
        timeout = export_timeout(given)
        exporters = [
            reported(
                build_span_exporter(
                    name, protocol=settings.traces_protocol, file_path=file_path, timeout=timeout
                ),
                name,
                given,
            )
            for name in chosen
        ]
        _state.tracing = _TracingRequest(service_name, exporter, file_path, dict(env or {}), set_global)
        _retire_tracing()
        if settings.disabled:
            spans.use_tracer_provider(trace_api.NoOpTracerProvider())
        if not exporters:
            return None
        provider = TracerProvider(resource=_resource(settings, service_name), shutdown_on_exit=False)
        for span_exporter in exporters:
            if isinstance(span_exporter, InMemorySpanExporter):
                _state.memory = span_exporter
            provider.add_span_processor(_processor(span_exporter))
        _state.exporters = exporters
        _install_tracing(provider, set_global)
        return provider


def configure_metrics(
    service_name: str,
    reader: MetricReader | None = None,
    *,
    force: bool = False,
    env: Mapping[str, str] | None = None,
    set_global: bool = True,
) -> MeterProvider | None:
    """Install this process's meter provider, reading into `reader` or per OTEL_METRICS_EXPORTER."""
    with _lock:
        if _state.meter_provider is not None and not force:
            return _state.meter_provider
        settings = TelemetrySettings.from_env_mapping(env or {})
        _state.metrics = _MetricsRequest(service_name, reader, dict(env or {}), set_global)
        _retire_metrics()
        if settings.disabled:
            metrics.use_meter_provider(metrics_api.NoOpMeterProvider())
            return None
        readers = (
            [reader]
            if reader is not None
            else [
                build_metric_reader(n, protocol=settings.metrics_protocol) for n in settings.metrics_exporters
            ]
        )
        if not readers:
            return None
        provider = MeterProvider(
            metric_readers=readers, resource=_resource(settings, service_name), shutdown_on_exit=False
        )
        _state.meter_provider = provider
        metrics.use_meter_provider(provider)
        if set_global and not _state.global_meter_set:
            metrics_api.set_meter_provider(provider)
            _state.global_meter_set = True
        _register_atexit()
        return provider


def install_in_memory(service_name: str = "pressroom-test") -> InMemorySpanExporter:
    """Replace the tracer provider with one that keeps finished spans in memory (tests)."""
    with _lock:
        _retire_tracing()
        exporter = InMemorySpanExporter()
        provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: service_name}), shutdown_on_exit=False
        )
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _state.memory = exporter
        _install_tracing(provider, set_global=False)
        return exporter


def memory_exporter() -> InMemorySpanExporter | None:
    """The in-memory exporter in use (`install_in_memory` or OTEL_TRACES_EXPORTER=memory)."""
    return _state.memory


def configure_after_fork(
    service_name: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    exporter: str | None = None,
    file_path: Path | None = None,
) -> TracerProvider | None:
    """Build fresh providers in a forked worker (connect it to worker_process_init).

    The providers inherited from the parent are dropped without a shutdown:
    their exporters hold the parent's connections and queues. The new ones
    are configured as the parent last asked, except for what is given here
    (a parent that configured nothing asked for nothing: pass `env`).
    """
    with _lock:
        _state.tracer_provider = None
        _state.memory = None
        last = _state.tracing or _TracingRequest(service_name or "pressroom")
        metrics_last = _state.metrics
        if metrics_last is not None and metrics_last.reader is None:
            _state.meter_provider = None
            configure_metrics(
                service_name or metrics_last.service_name,
                env=env if env is not None else metrics_last.env,
                force=True,
                set_global=metrics_last.set_global,
            )
        return configure_tracing(
            service_name or last.service_name,
            exporter=exporter if exporter is not None else last.exporter,
            file_path=file_path if file_path is not None else last.file_path,
            env=env if env is not None else last.env,
            set_global=last.set_global,
            force=True,
        )


def shutdown() -> None:
    """Flush and shut down both providers; helpers fall back to the global ones."""
    with _lock:
        _state.tracing = _state.metrics = None
        _retire_tracing()
        _retire_metrics()


def _resource(settings: TelemetrySettings, service_name: str) -> Resource:
    # Resource.create also applies OTEL_RESOURCE_ATTRIBUTES; OTEL_SERVICE_NAME wins over the caller.
    return Resource.create({SERVICE_NAME: settings.service_name or service_name})


def _processor(exporter: SpanExporter) -> SpanProcessor:
    # Local exporters write as each span ends, so a crash loses nothing; the network batches.
    if isinstance(exporter, ConsoleSpanExporter | InMemorySpanExporter | JsonLinesSpanExporter):
        return SimpleSpanProcessor(exporter)
    return BatchSpanProcessor(exporter)


def _install_tracing(provider: TracerProvider, set_global: bool) -> None:
    _state.tracer_provider = provider
    spans.use_tracer_provider(provider)
    if set_global and not _state.global_tracer_set:
        trace_api.set_tracer_provider(provider)
        _state.global_tracer_set = True
    _register_atexit()


def _retire_tracing() -> None:
    provider, _state.tracer_provider, _state.memory = _state.tracer_provider, None, None
    exporters, _state.exporters = _state.exporters, []
    spans.use_tracer_provider(None)
    if provider is not None:

        def stop() -> None:
            provider.force_flush()
            provider.shutdown()

        stop_bounded(stop, exporters)


def _retire_metrics() -> None:
    provider, _state.meter_provider = _state.meter_provider, None
    metrics.use_meter_provider(None)
    if provider is not None:
        stop_bounded(provider.shutdown, [])


def _register_atexit() -> None:
    if not _state.atexit_registered:
        atexit.register(shutdown)
        _state.atexit_registered = True


__all__ = [
    "METRIC_EXPORTERS",
    "PROTOCOLS",
    "TRACE_EXPORTERS",
    "TelemetrySettings",
    "configure_after_fork",
    "configure_metrics",
    "configure_tracing",
    "install_in_memory",
    "memory_exporter",
    "parse_exporters",
    "shutdown",
]

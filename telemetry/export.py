"""Exporters: the JSON-lines span file and the exporter names of OTEL_*_EXPORTER.

`file` is Pressroom's own exporter: one JSON object per finished span, appended
to a file that the API, the relay and every worker share, so tests and
`pressroom trace` can read a saga's spans from all its processes
(`render.read_span_file` reads them back). A line holds `name`, `service`,
`trace_id`, `span_id`, `parent_span_id` (hex), `kind`, `start_ns`, `end_ns`,
`attributes`, `status` (`code`, `description`), `events` and `links`.

The OTLP exporters are imported only when chosen: the gRPC stack is heavy
and should not be loaded, let alone forked, by a process that does not use it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

logger = logging.getLogger(__name__)


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """One finished span as the plain dict the file exporter writes."""
    context = span.get_span_context()
    return {
        "name": span.name,
        "service": span.resource.attributes.get(SERVICE_NAME),
        "trace_id": format_trace_id(context.trace_id) if context else None,
        "span_id": format_span_id(context.span_id) if context else None,
        "parent_span_id": format_span_id(span.parent.span_id) if span.parent else None,
        "kind": span.kind.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": dict(span.attributes or {}),
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "events": [
            {"name": event.name, "timestamp_ns": event.timestamp, "attributes": dict(event.attributes or {})}
            for event in span.events
        ],
        "links": [
            {
                "trace_id": format_trace_id(link.context.trace_id),
                "span_id": format_span_id(link.context.span_id),
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
    }


class JsonLinesSpanExporter(SpanExporter):
    """Appends one JSON line per span to a file shared by several processes.

    Each line is one `write` on a descriptor opened with O_APPEND, so lines
    from concurrent processes do not interleave; a forked child opens its own
    descriptor on first use.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [json.dumps(span_to_dict(span), separators=(",", ":"), default=str) + "\n" for span in spans]
        try:
            with self._lock:
                fd = self._open()
                for line in lines:
                    data = line.encode()
                    while data:
                        data = data[os.write(fd, data) :]
        except OSError:
            logger.warning("could not write spans to %s", self.path, exc_info=True)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _open(self) -> int:
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        if self._fd is not None:
            os.close(self._fd)  # the parent's descriptor, inherited over fork
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pid = os.getpid()
        return self._fd

    def shutdown(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True  # every export is written through


def build_span_exporter(
    name: str, *, protocol: str = "grpc", file_path: Path | None = None, timeout: float | None = None
) -> SpanExporter:
    """The exporter an OTEL_TRACES_EXPORTER name stands for. `timeout` (seconds) bounds one
    OTLP export, retries included; None leaves it to OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT."""
    if name == "otlp":
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter(timeout=timeout)
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(timeout=timeout)
    if name == "console":
        return ConsoleSpanExporter(out=sys.stderr)
    if name == "memory":
        return InMemorySpanExporter()
    if name == "file":
        if file_path is None:
            raise ValueError("the file span exporter needs file_path")
        return JsonLinesSpanExporter(file_path)
    raise ValueError(f"unknown span exporter {name!r}")


def build_metric_reader(name: str, *, protocol: str = "grpc") -> MetricReader:
    """The periodic reader an OTEL_METRICS_EXPORTER name stands for."""
    if name == "otlp":
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            return PeriodicExportingMetricReader(OTLPMetricExporter())
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as Grpc

        return PeriodicExportingMetricReader(Grpc())
    if name == "console":
        return PeriodicExportingMetricReader(ConsoleMetricExporter(out=sys.stderr))
    raise ValueError(f"unknown metric exporter {name!r}")


__all__ = ["JsonLinesSpanExporter", "build_metric_reader", "build_span_exporter", "span_to_dict"]

"""Exporting that never holds a process up: a short OTLP timeout, a bounded stop, one line.

A collector that is down, or that accepts a connection and never answers, used to
cost every CLI command 5-7 s at exit (the SDK's 10 s export timeout with backoff
between attempts, and a flush that takes no deadline) and one `error:` line per
attempt. Here:

- one OTLP export, its retries included, gives up after `EXPORT_TIMEOUT_SECONDS`
  unless OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT says otherwise (`export_timeout`);
- `stop_bounded` gives a provider `EXIT_WAIT_SECONDS` to flush and shut down, then
  shuts its exporters down (which ends an OTLP exporter's retry wait and cancels its
  gRPC call) and waits `EXIT_GRACE_SECONDS` more before leaving the work behind on a
  daemon thread that exit does not wait for;
- the OTLP exporters' own log records are held back (`_ExportNotes`); a failing export
  makes one warning line (`ReportedExporter`), and another only after an export
  succeeded again. Nothing is written when no OTLP export was asked for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

# The SDK's default is 10 s per export, with backoff between attempts.
EXPORT_TIMEOUT_SECONDS: Final = 2.0
EXIT_WAIT_SECONDS: Final = 1.0
EXIT_GRACE_SECONDS: Final = 0.5
TIMEOUT_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
# Where the OTLP exporters log each failed attempt, retry and shutdown.
OTLP_LOGGERS: Final = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)

logger = logging.getLogger("telemetry.setup")


def export_timeout(env: Mapping[str, str]) -> float | None:
    """EXPORT_TIMEOUT_SECONDS, or None when the OTEL_* variables set a timeout of their own."""
    return None if any(env.get(name, "").strip() for name in TIMEOUT_VARIABLES) else EXPORT_TIMEOUT_SECONDS


class _ExportNotes(logging.Filter):
    """Holds back the OTLP exporters' records, keeping the last error's text (a retry's
    warning is not kept: it says "retrying", and the export may have given up since)."""

    def __init__(self) -> None:
        super().__init__()
        self.last_error = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.last_error = " ".join(record.getMessage().split())
        return False


_notes = _ExportNotes()


class ReportedExporter(SpanExporter):
    """An OTLP exporter whose failures make one warning line: the first failure, and again
    only after an export succeeded. `quiet()` silences it (a process leaving it behind)."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self.inner = inner
        self.where = where
        self._failing = False
        self._quiet = False
        self._stopped = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        _notes.last_error = ""
        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self._failing = False
        elif not self._failing:
            self._failing = True
            if not self._quiet:
                why = f": {_notes.last_error}" if _notes.last_error else " (no answer in time)"
                logger.warning("traces not exported to %s; they are dropped%s", self.where, why)
        return result

    def shutdown(self) -> None:
        if not self._stopped:  # `stop_bounded` may shut it down before the provider does
            self._stopped = True
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def quiet(self) -> None:
        self._quiet = True


def reported(exporter: SpanExporter, name: str, env: Mapping[str, str]) -> SpanExporter:
    """`exporter`, wrapped in a `ReportedExporter` when it is the OTLP one."""
    if name != "otlp":
        return exporter
    for logger_name in OTLP_LOGGERS:
        held = logging.getLogger(logger_name)
        if _notes not in held.filters:
            held.addFilter(_notes)
    where = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or "the default OTLP endpoint"
    )
    return ReportedExporter(exporter, where)


def stop_bounded(stop: Callable[[], object], exporters: Sequence[SpanExporter]) -> None:
    """Run `stop` (flush, then shut down) for at most EXIT_WAIT_SECONDS; then shut the
    exporters down and give them EXIT_GRACE_SECONDS more before leaving them behind.

    The SDK's flush takes no deadline (BatchProcessor.force_flush ignores its argument), so
    the bound is kept here, on a thread of its own."""
    worker = threading.Thread(target=stop, name="pressroom-telemetry-stop", daemon=True)
    worker.start()
    worker.join(EXIT_WAIT_SECONDS)
    if not worker.is_alive():
        return
    for exporter in exporters:
        exporter.shutdown()
    worker.join(EXIT_GRACE_SECONDS)
    for exporter in exporters:
        if isinstance(exporter, ReportedExporter):
            exporter.quiet()


__all__ = [
    "EXIT_GRACE_SECONDS",
    "EXIT_WAIT_SECONDS",
    "EXPORT_TIMEOUT_SECONDS",
    "ReportedExporter",
    "export_timeout",
    "reported",
    "stop_bounded",
]

"""Trace: the send phase around the executor (an `Executor` wrapping an `Executor`).

A read is a CLIENT span, a write a PRODUCER span; a write that did not apply
marks its send span as failed with the exception, as it would had it escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from orchestrator.harness.spec import ProbeAnswer, Risk
from orchestrator.toolpath.call import Call
from orchestrator.toolpath.execute import Attempt, Executor
from telemetry import names


class Trace:
    def __init__(self, next: Executor, clock: Callable[[], datetime]) -> None:
        self.next = next
        self.clock = clock

    def run(self, call: Call) -> Attempt:
        read = call.spec.risk is Risk.READ_ONLY
        call.phases.enter(names.SEND, SpanKind.CLIENT if read else SpanKind.PRODUCER)
        call.times.sent_at = self.clock()
        attempt = self.next.run(call)
        if not read and attempt.error is not None:
            span = trace.get_current_span()
            span.record_exception(attempt.error)
            span.set_status(Status(StatusCode.ERROR, (attempt.reason or "")[:200]))
        call.phases.close()
        return attempt

    def probe(self, call: Call) -> ProbeAnswer:
        return self.next.probe(call)


__all__ = ["Trace"]

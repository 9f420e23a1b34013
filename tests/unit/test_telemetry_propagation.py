"""Trace context through an outbox row, the relay and a worker: one saga, one trace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from telemetry import names, propagation, setup, spans


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    exporter = setup.install_in_memory()
    yield exporter
    setup.shutdown()


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (found,) = [span for span in finished if span.name == name]
    return found


def test_inject_extract_round_trip_keeps_the_trace(memory: InMemorySpanExporter) -> None:
    with spans.action_span("writer.draft") as span:
        carrier = propagation.inject_context()
    assert "traceparent" in carrier

    context = propagation.extract_context(carrier)
    remote = trace.get_current_span(context).get_span_context()
    assert remote.is_remote
    assert remote.trace_id == span.get_span_context().trace_id
    assert remote.span_id == span.get_span_context().span_id


def test_extract_ignores_headers_that_are_not_strings(memory: InMemorySpanExporter) -> None:
    with spans.action_span("writer.draft"):
        carrier: dict[str, object] = {**propagation.inject_context(), "retries": 3, "eta": None}
    context = propagation.extract_context(carrier)
    assert trace.get_current_span(context).get_span_context().is_valid


def test_message_spans_form_one_trace(memory: InMemorySpanExporter) -> None:
    attrs = {names.ATTR_SAGA_ID: "s-1"}
    with spans.action_span("saga.approve", attrs) as action:
        row_carrier = propagation.create_span("publisher", "m-1", "redis", attrs)
    # the relay, later and elsewhere
    with propagation.send_span("publisher", "m-1", "redis", row_carrier, attrs):
        pass
    # a worker, with the headers the relay forwarded
    with propagation.process_span("publisher", "m-1", "redis", row_carrier, attrs):
        with spans.action_span("site.publish", attrs):
            pass
        with propagation.settle_span("publisher", "m-1", "redis", attrs):
            pass

    finished = memory.get_finished_spans()
    create = by_name(finished, "create publisher")
    send = by_name(finished, "send publisher")
    process = by_name(finished, "process publisher")
    settle = by_name(finished, "settle publisher")
    publish = by_name(finished, "action site.publish")
    trace_id = action.get_span_context().trace_id
    assert {span.context.trace_id for span in finished} == {trace_id}

    assert create.kind is SpanKind.PRODUCER
    assert create.parent is not None and create.parent.span_id == action.get_span_context().span_id
    assert send.kind is SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == create.context.span_id
    assert process.kind is SpanKind.CONSUMER
    assert process.parent is not None and process.parent.span_id == create.context.span_id
    assert [link.context.span_id for link in process.links] == [create.context.span_id]
    assert publish.parent is not None and publish.parent.span_id == process.context.span_id
    assert settle.kind is SpanKind.CLIENT
    assert settle.parent is not None and settle.parent.span_id == process.context.span_id

    assert process.attributes is not None
    assert process.attributes[names.MESSAGING_SYSTEM] == "redis"
    assert process.attributes[names.MESSAGING_DESTINATION_NAME] == "publisher"
    assert process.attributes[names.MESSAGING_MESSAGE_ID] == "m-1"
    assert process.attributes[names.MESSAGING_OPERATION_TYPE] == "process"
    assert process.attributes[names.ATTR_SAGA_ID] == "s-1"
    operations = {
        span.name: (span.attributes or {})[names.MESSAGING_OPERATION_TYPE] for span in (create, send, settle)
    }
    assert operations == {
        "create publisher": "create",
        "send publisher": "send",
        "settle publisher": "settle",
    }


def test_message_without_context_starts_its_own_trace(memory: InMemorySpanExporter) -> None:
    with (
        spans.action_span("unrelated") as current,
        propagation.process_span("writer", "m-2", "inline", {}) as process,
    ):
        pass
    assert process.get_span_context().trace_id != current.get_span_context().trace_id
    finished = by_name(memory.get_finished_spans(), "process writer")
    assert finished.parent is None
    assert finished.links == ()


def test_failed_processing_is_an_error(memory: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError), propagation.process_span("writer", "m-3", "redis", None):
        raise RuntimeError("handler failed")
    (span,) = memory.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR


@pytest.mark.parametrize(
    ("url", "system"),
    [
        ("redis://localhost:6379/0", "redis"),
        ("rediss://cache.example:6380/1", "redis"),
        ("redis+socket:///tmp/redis.sock", "redis"),
        ("amqp://guest@localhost//", "rabbitmq"),
        ("pyamqp://guest@localhost//", "rabbitmq"),
        ("memory://", "inline"),
        ("inline://", "inline"),
        ("sqs://queue", "sqs"),
        ("", "unknown"),
    ],
)
def test_system_for_broker_url(url: str, system: str) -> None:
    assert propagation.system_for_broker_url(url) == system

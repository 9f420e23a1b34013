"""The action span, its four phases, attribute hygiene and the approval wait."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from telemetry import names, setup, spans

DOCUMENT = "# Quarterly report\n\nThe confidential draft text of version 3."
TOKEN = "v1.c2FnYS0x.4f1d2e3c9b8a7f6e5d4c3b2a19080706"


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    exporter = setup.install_in_memory()
    yield exporter
    setup.shutdown()


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (found,) = [span for span in finished if span.name == name]
    return found


class Risk(Enum):
    HIGH = "high_risk"


def test_action_span_holds_four_phases_in_order(memory: InMemorySpanExporter) -> None:
    attrs = spans.ActionAttrs(saga_id="s-1", version=3, version_digest="d" * 64, risk="high_risk")
    with spans.action_span("site.publish", attrs):
        for name in names.PHASES:
            with spans.phase(name, attrs):
                pass

    finished = memory.get_finished_spans()
    action = by_name(finished, "action site.publish")
    phases = [span for span in finished if span.name in names.PHASES]
    assert [span.name for span in phases] == list(names.PHASES)
    starts = [span.start_time or 0 for span in phases]
    assert starts == sorted(starts)
    for span in phases:
        assert span.parent is not None
        assert span.parent.span_id == action.context.span_id
        assert span.context.trace_id == action.context.trace_id
        assert span.attributes is not None
        assert span.attributes[names.ATTR_SAGA_ID] == "s-1"
        assert span.attributes[names.ATTR_VERSION] == 3
    assert action.attributes is not None
    assert action.attributes[names.ATTR_TOOL] == "site.publish"
    assert action.attributes[names.ATTR_RISK] == "high_risk"
    kinds = {span.name: span.kind for span in phases}
    assert kinds[names.SEND] is SpanKind.PRODUCER
    assert kinds[names.PROPOSAL] is SpanKind.INTERNAL


def test_phase_kind_can_be_chosen(memory: InMemorySpanExporter) -> None:
    with spans.action_span("source.read"), spans.phase(names.SEND, kind=SpanKind.CLIENT):
        pass
    assert by_name(memory.get_finished_spans(), names.SEND).kind is SpanKind.CLIENT


def test_exception_in_a_phase_sets_error_and_records_it(memory: InMemorySpanExporter) -> None:
    with pytest.raises(TimeoutError), spans.action_span("webhook.post"), spans.phase(names.SEND):
        raise TimeoutError("no answer within 10 s")

    finished = memory.get_finished_spans()
    send = by_name(finished, names.SEND)
    assert send.status.status_code is StatusCode.ERROR
    assert send.status.description is not None and "TimeoutError" in send.status.description
    (event,) = send.events
    assert event.name == "exception"
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "TimeoutError"
    assert by_name(finished, "action webhook.post").status.status_code is StatusCode.ERROR


def test_expected_exception_is_recorded_but_not_an_error(memory: InMemorySpanExporter) -> None:
    class ApprovalRequired(Exception):
        pass

    with pytest.raises(ApprovalRequired), spans.phase(names.AUTHORIZATION, expected=(ApprovalRequired,)):
        raise ApprovalRequired("saga s-1 waits for a person")

    (span,) = memory.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET
    assert [event.name for event in span.events] == ["exception"]


def test_mark_error_and_annotate_touch_the_current_span(memory: InMemorySpanExporter) -> None:
    with spans.action_span("site.publish"):
        spans.annotate({names.ATTR_RISK: Risk.HIGH, "pressroom.markdown": DOCUMENT})
        spans.mark_error("uncertain")
    (span,) = memory.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "uncertain"
    assert span.attributes is not None
    assert span.attributes[names.ATTR_RISK] == "high_risk"
    assert "pressroom.markdown" not in span.attributes


def test_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="phases are proposal"), spans.phase("execute"):
        pass


def test_safe_attributes_drops_document_text_and_secrets() -> None:
    clean = spans.safe_attributes(
        {
            "markdown": DOCUMENT,
            "pressroom.version.markdown": DOCUMENT,
            "token": TOKEN,
            "approval_token": TOKEN,
            "pressroom.approval_token": TOKEN,
            "secret": "s3cr3t",
            "http.request.body": "{}",
            "http.request.header.authorization": "Bearer x",
            names.ATTR_SAGA_ID: "s-1",
            names.ATTR_IDEMPOTENCY_KEY: "s-1:site:3",
            names.ATTR_VERSION: 3,
            names.ATTR_RISK: Risk.HIGH,
            "pressroom.path": Path("out/site"),
            "pressroom.destinations": ["site:out", "git:repo"],
            "pressroom.nothing": None,
            "pressroom.long": "x" * (spans.MAX_VALUE_CHARS + 1),
            "pressroom.mixed": ["a", 1],
            "pressroom.object": object(),
        }
    )
    assert clean == {
        names.ATTR_SAGA_ID: "s-1",
        names.ATTR_IDEMPOTENCY_KEY: "s-1:site:3",
        names.ATTR_VERSION: 3,
        names.ATTR_RISK: "high_risk",
        "pressroom.path": "out/site",
        "pressroom.destinations": ("site:out", "git:repo"),
    }


def test_no_span_holds_document_text_or_tokens(memory: InMemorySpanExporter) -> None:
    leaky = {names.ATTR_SAGA_ID: "s-1", "markdown": DOCUMENT, "approval_token": TOKEN, "body": DOCUMENT}
    with spans.action_span("site.publish", leaky):
        for name in names.PHASES:
            with spans.phase(name, leaky):
                pass
    spans.approval_wait_span("s-1", 3, 1, 2, "rita")

    for span in memory.get_finished_spans():
        text = repr(dict(span.attributes or {})) + repr([dict(e.attributes or {}) for e in span.events])
        assert DOCUMENT not in text
        assert TOKEN not in text


def test_action_attrs_skip_none() -> None:
    attrs = spans.ActionAttrs(saga_id="s-1", tool="site.publish", destination="site:out")
    assert attrs.attributes() == {
        names.ATTR_SAGA_ID: "s-1",
        names.ATTR_TOOL: "site.publish",
        names.ATTR_DESTINATION: "site:out",
    }


def test_approval_wait_span_has_explicit_times(memory: InMemorySpanExporter) -> None:
    ready = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    approved = ready + timedelta(minutes=42, microseconds=7)
    context = spans.approval_wait_span(
        "s-1", 2, spans.to_ns(ready), spans.to_ns(approved), "rita", version_digest="abc"
    )

    (span,) = memory.get_finished_spans()
    assert span.name == names.APPROVAL_WAIT
    assert span.context.span_id == context.span_id
    assert span.start_time == spans.to_ns(ready)
    assert (span.end_time or 0) - (span.start_time or 0) == (42 * 60 * 1_000_000 + 7) * 1_000
    assert span.attributes is not None
    assert span.attributes[names.ATTR_APPROVER] == "rita"
    assert span.attributes[names.ATTR_VERSION] == 2


def test_approval_wait_end_before_start_is_clamped(memory: InMemorySpanExporter) -> None:
    spans.approval_wait_span("s-1", 1, 5_000, 4_000, "rita")
    (span,) = memory.get_finished_spans()
    assert span.start_time == span.end_time == 5_000


def test_to_ns_is_exact_and_treats_naive_as_utc() -> None:
    moment = datetime(2025, 1, 2, 3, 4, 5, 678901)
    assert spans.to_ns(moment) == spans.to_ns(moment.replace(tzinfo=UTC))
    assert spans.to_ns(moment) % 1_000_000_000 == 678_901_000


def test_destination_attribute_drops_credentials_and_queries() -> None:
    assert spans.destination_attribute("webhook:https://u:pw@hooks.example:8443/in?token=x#f") == (
        "webhook:https://hooks.example:8443/in"
    )
    assert spans.destination_attribute("site:/srv/site") == "site:/srv/site"
    assert spans.destination_attribute("webhook:http://host:notaport/x") == "webhook:http://host/x"
    assert spans.destination_attribute(None) is None


def test_with_nothing_recording_a_span_keeps_the_context_it_was_given() -> None:
    """Tracing off: no span is made, yet a parent carried in from a message stays current
    (the next handoff still carries it), exactly as with a no-op tracer."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    spans.use_tracer_provider(trace.NoOpTracerProvider())
    try:
        assert not spans.recording()
        parent = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
        carried = trace.set_span_in_context(NonRecordingSpan(parent))
        with spans.open_span("handle", {"pressroom.saga.id": "s-1"}, context=carried) as span:
            assert span.get_span_context() == parent
            assert trace.get_current_span().get_span_context() == parent
            with spans.phase(names.PROPOSAL):
                assert trace.get_current_span().get_span_context() == parent
        assert not trace.get_current_span().get_span_context().is_valid
        with pytest.raises(RuntimeError), spans.open_span("fails"):
            raise RuntimeError("still raised")
    finally:
        spans.use_tracer_provider(None)

"""Trace context across the outbox row, the relay, the broker and the workers.

One saga is one trace, although its work crosses processes. The writer opens a
`create {queue}` span and stores its W3C context (`traceparent`, `tracestate`)
in the outbox row; the relay opens `send {queue}` as a child of that context
and forwards the row's carrier unchanged as the message headers; the worker
opens `process {queue}` with the creation context as parent and as a link,
then `settle {queue}` once it acknowledged the message. Attributes follow the
OpenTelemetry messaging semantic conventions.

API only: the global propagator (W3C trace context and baggage unless
OTEL_PROPAGATORS says otherwise) does the encoding.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.util.types import AttributeValue

from telemetry import names
from telemetry.spans import Attrs, as_attributes, open_span, safe_attributes, tracer

_SYSTEMS = {
    "redis": names.SYSTEM_REDIS,
    "rediss": names.SYSTEM_REDIS,
    "sentinel": names.SYSTEM_REDIS,
    "amqp": names.SYSTEM_RABBITMQ,
    "amqps": names.SYSTEM_RABBITMQ,
    "pyamqp": names.SYSTEM_RABBITMQ,
    "memory": names.SYSTEM_INLINE,
    "inline": names.SYSTEM_INLINE,
}


def inject_context(context: Context | None = None) -> dict[str, str]:
    """The current (or given) trace context as string headers; empty when there is none."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return carrier


def extract_context(carrier: Mapping[str, object] | None) -> Context:
    """The context a carrier holds; non-string values (other Celery headers) are ignored.

    An empty or missing carrier gives an empty context, so a message sent
    without tracing starts a trace of its own rather than joining whatever
    happens to be current in the worker.
    """
    headers = {key: value for key, value in (carrier or {}).items() if isinstance(value, str)}
    return propagate.extract(headers, context=Context())


def system_for_broker_url(url: str) -> str:
    """`messaging.system` for a broker URL: redis, rabbitmq, inline, else the scheme."""
    scheme = urlsplit(url).scheme.lower()
    transport = scheme.split("+", 1)[0]  # e.g. redis+socket://, sentinel+ssl://
    return _SYSTEMS.get(transport, transport or "unknown")


def messaging_attributes(
    queue: str,
    message_id: str,
    system: str,
    operation_type: str,
    operation_name: str,
    attrs: Attrs = None,
) -> dict[str, AttributeValue]:
    """The semantic-convention attributes of one messaging span, plus `attrs`."""
    base = safe_attributes(
        {
            names.MESSAGING_SYSTEM: system,
            names.MESSAGING_DESTINATION_NAME: queue,
            names.MESSAGING_MESSAGE_ID: message_id,
            names.MESSAGING_OPERATION_TYPE: operation_type,
            names.MESSAGING_OPERATION_NAME: operation_name,
        }
    )
    return {**as_attributes(attrs), **base}


def create_span(queue: str, message_id: str, system: str, attrs: Attrs = None) -> dict[str, str]:
    """Record the creation of a message; return the carrier to store in its outbox row.

    Called inside the transaction that writes the row, under the span of the
    state change that caused it.
    """
    attributes = messaging_attributes(queue, message_id, system, names.OP_CREATE, names.OP_CREATE, attrs)
    with tracer().start_as_current_span(
        f"{names.OP_CREATE} {queue}", kind=SpanKind.PRODUCER, attributes=attributes
    ):
        return inject_context()


@contextmanager
def send_span(
    queue: str,
    message_id: str,
    system: str,
    parent_carrier: Mapping[str, object] | None,
    attrs: Attrs = None,
    *,
    operation_name: str = "publish",
) -> Iterator[Span]:
    """The relay's publish of an outbox row, a child of the row's creation context.

    Forward `parent_carrier` itself as the message headers, so every delivery
    (the relay sends at least once) joins the creation context.
    """
    attributes = messaging_attributes(queue, message_id, system, names.OP_SEND, operation_name, attrs)
    with open_span(
        f"{names.OP_SEND} {queue}",
        attributes,
        kind=SpanKind.PRODUCER,
        context=extract_context(parent_carrier),
    ) as span:
        yield span


@contextmanager
def process_span(
    queue: str,
    message_id: str,
    system: str,
    carrier: Mapping[str, object] | None,
    attrs: Attrs = None,
    *,
    operation_name: str = "process",
) -> Iterator[Span]:
    """A worker's handling of a message: parent is the creation context, also linked.

    The link keeps the producer reachable in backends that draw consumer
    spans as roots of their own. Exceptions are recorded and re-raised.
    """
    context = extract_context(carrier)
    creation = trace.get_current_span(context).get_span_context()
    links = [Link(creation)] if creation.is_valid else []
    attributes = messaging_attributes(queue, message_id, system, names.OP_PROCESS, operation_name, attrs)
    with open_span(
        f"{names.OP_PROCESS} {queue}", attributes, kind=SpanKind.CONSUMER, context=context, links=links
    ) as span:
        yield span


@contextmanager
def settle_span(
    queue: str,
    message_id: str,
    system: str,
    attrs: Attrs = None,
    *,
    operation_name: str = "ack",
) -> Iterator[Span]:
    """The acknowledgement (or rejection) of a message, under the current process span."""
    attributes = messaging_attributes(queue, message_id, system, names.OP_SETTLE, operation_name, attrs)
    with open_span(f"{names.OP_SETTLE} {queue}", attributes, kind=SpanKind.CLIENT) as span:
        yield span


__all__ = [
    "create_span",
    "extract_context",
    "inject_context",
    "messaging_attributes",
    "process_span",
    "send_span",
    "settle_span",
    "system_for_broker_url",
]

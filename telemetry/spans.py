"""Span helpers: the one span per action, its four phases, the approval wait.

This module owns which `TracerProvider` every Pressroom span goes to: the one
installed with `use_tracer_provider` (setup.py does that), else the global one.
The global provider can be set only once per process; holding our own
reference lets tests and forked workers swap providers freely.

It imports the OpenTelemetry API only, never the SDK, so the harness can use
it without loading exporters. Every attribute passes `safe_attributes`, which
drops keys that carry secrets or document text: a span never holds a token or
the markdown of a version.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from functools import lru_cache
from pathlib import PurePath
from typing import Final
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)
from opentelemetry.util.types import AttributeValue

from telemetry import names

SENSITIVE_WORDS: Final = frozenset(
    {
        "markdown",
        "body",
        "token",
        "secret",
        "password",
        "api_key",
        "signing_key",
        "credentials",
        "cookie",
        "authorization",
    }
)
"""A key is dropped when a dotted segment equals one of these or ends in `_<word>`."""

MAX_VALUE_CHARS: Final = 512
"""Longer strings are dropped, not cut: an id, digest or URI is never this long; text is."""

_provider: TracerProvider | None = None
_tracer: tuple[TracerProvider, Tracer] | None = None
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """Send Pressroom spans to `provider`; None falls back to the global provider."""
    global _provider
    _provider = provider


def current_tracer_provider() -> TracerProvider:
    """The provider Pressroom spans go to right now."""
    return _provider if _provider is not None else trace.get_tracer_provider()


def recording() -> bool:
    """False while no span can be recorded (no provider installed, or tracing disabled)."""
    return not isinstance(current_tracer_provider(), trace.NoOpTracerProvider | trace.ProxyTracerProvider)


def tracer() -> Tracer:
    """Pressroom's tracer from the current provider (a swapped provider takes effect at once)."""
    global _tracer
    provider = current_tracer_provider()
    cached = _tracer
    if cached is None or cached[0] is not provider:
        cached = _tracer = (provider, provider.get_tracer(names.SCOPE))
    return cached[1]


# -- attributes ------------------------------------------------------------------


@lru_cache(maxsize=1024)
def is_sensitive_key(key: str) -> bool:
    """True for attribute keys known to carry secrets or document text (a pure function of the
    key, remembered: the same few dozen keys are asked about on every span)."""
    for segment in key.lower().split("."):
        for word in SENSITIVE_WORDS:
            if segment == word or segment.endswith("_" + word):
                return True
    return False


def safe_attributes(attrs: Mapping[str, object] | None) -> dict[str, AttributeValue]:
    """`attrs` without sensitive keys, None values, over-long text or unsupported types."""
    clean: dict[str, AttributeValue] = {}
    for key, value in (attrs or {}).items():
        if is_sensitive_key(key):
            continue
        converted = _attribute_value(value)
        if converted is not None:
            clean[key] = converted
    return clean


def _attribute_value(value: object) -> AttributeValue | None:
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_VALUE_CHARS else None
    if isinstance(value, UUID | PurePath):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return _sequence_value(value)
    return None


def _sequence_value(values: Sequence[object]) -> AttributeValue | None:
    # OpenTelemetry accepts homogeneous sequences of one primitive type only.
    items = list(values)
    texts = [item for item in items if isinstance(item, str)]
    if len(texts) == len(items):
        return tuple(texts) if all(len(text) <= MAX_VALUE_CHARS for text in texts) else None
    flags = [item for item in items if isinstance(item, bool)]
    if len(flags) == len(items):
        return tuple(flags)
    numbers = [item for item in items if isinstance(item, int | float) and not isinstance(item, bool)]
    if len(numbers) != len(items):
        return None
    integers = [item for item in numbers if isinstance(item, int)]
    if len(integers) == len(items):
        return tuple(integers)
    return tuple(float(item) for item in numbers)


@dataclass(frozen=True, slots=True)
class ActionAttrs:
    """The attributes every span of one action carries; None fields are left out."""

    saga_id: str | None = None
    version: int | None = None
    version_digest: str | None = None
    tool: str | None = None
    risk: str | None = None
    idempotency_key: str | None = None
    destination: str | None = None

    def attributes(self) -> dict[str, AttributeValue]:
        pairs: tuple[tuple[str, str | int | None], ...] = (
            (names.ATTR_SAGA_ID, self.saga_id),
            (names.ATTR_VERSION, self.version),
            (names.ATTR_VERSION_DIGEST, self.version_digest),
            (names.ATTR_TOOL, self.tool),
            (names.ATTR_RISK, self.risk),
            (names.ATTR_IDEMPOTENCY_KEY, self.idempotency_key),
            (names.ATTR_DESTINATION, self.destination),
        )
        return safe_attributes({key: value for key, value in pairs if value is not None})


Attrs = ActionAttrs | Mapping[str, object] | None
"""What the helpers accept as attributes."""


def as_attributes(attrs: Attrs) -> dict[str, AttributeValue]:
    """Either form of attributes, passed through `safe_attributes`."""
    if isinstance(attrs, ActionAttrs):
        return attrs.attributes()
    return safe_attributes(attrs)


# -- spans ---------------------------------------------------------------------------


@contextmanager
def open_span(
    name: str,
    attrs: Attrs = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    context: Context | None = None,
    links: Iterable[Link] = (),
    expected: tuple[type[BaseException], ...] = (),
) -> Iterator[Span]:
    """A current span that records an escaping exception and re-raises it.

    An exception sets ERROR status; one of the `expected` types (an outcome
    such as "approval required", not a failure) is recorded but leaves the
    status alone. While nothing is recorded (`recording()` is False) no span or
    attribute is made: the current span stays, or `context`'s becomes current,
    as a no-op tracer would leave them.
    """
    if not recording():
        with _unrecorded(context) as span:
            yield span
        return
    with tracer().start_as_current_span(
        name,
        context=context,
        kind=kind,
        attributes=as_attributes(attrs),
        links=list(links),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except expected as exc:
            span.record_exception(exc)
            raise
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, _describe(exc)))
            raise


@contextmanager
def _unrecorded(context: Context | None) -> Iterator[Span]:
    span = trace.get_current_span(context)
    if context is None:
        yield span
        return
    if not isinstance(span, NonRecordingSpan):
        span = NonRecordingSpan(span.get_span_context())
    with trace.use_span(span, end_on_exit=False):
        yield span


@contextmanager
def action_span(
    tool: str, attrs: Attrs = None, *, expected: tuple[type[BaseException], ...] = ()
) -> Iterator[Span]:
    """The one parent span of an action (`action {tool}`); phases open inside it."""
    attributes = {**as_attributes(attrs), names.ATTR_TOOL: tool} if recording() else None
    with open_span(names.action_span_name(tool), attributes, expected=expected) as span:
        yield span


@contextmanager
def phase(
    name: str,
    attrs: Attrs = None,
    kind: SpanKind | None = None,
    *,
    expected: tuple[type[BaseException], ...] = (),
) -> Iterator[Span]:
    """One of the four phases; `send` defaults to PRODUCER, the others to INTERNAL."""
    if name not in names.PHASES:
        raise ValueError(f"unknown phase {name!r}; phases are {', '.join(names.PHASES)}")
    if kind is None:
        kind = SpanKind.PRODUCER if name == names.SEND else SpanKind.INTERNAL
    with open_span(name, attrs, kind=kind, expected=expected) as span:
        yield span


def mark_error(description: str) -> None:
    """Set ERROR status on the current span (an outcome that did not raise)."""
    trace.get_current_span().set_status(Status(StatusCode.ERROR, description[:MAX_VALUE_CHARS]))


def annotate(attrs: Attrs) -> None:
    """Add (safe) attributes to the current span, e.g. once the risk class is known."""
    if recording():
        trace.get_current_span().set_attributes(as_attributes(attrs))


def destination_attribute(uri: object) -> str | None:
    """A destination URI as a span may carry it: no user, password, query or fragment.

    `webhook:https://user:pw@host/hook?token=x` becomes `webhook:https://host/hook`;
    `site:` and `git:` paths pass unchanged.
    """
    if not isinstance(uri, str) or not uri:
        return None
    scheme, _, target = uri.partition(":")
    if "://" not in target:
        return uri
    parts = urlsplit(target)
    host = parts.hostname or ""
    try:
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:  # a port that is not a number: keep the host only
        netloc = host
    return f"{scheme}:{urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"


def to_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exactly; a naive datetime is taken as UTC."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def approval_wait_span(
    saga_id: str,
    version: int,
    ready_at_ns: int,
    approved_at_ns: int,
    approver: str,
    *,
    version_digest: str | None = None,
    context: Context | None = None,
) -> SpanContext:
    """Record the wait from ready-for-review to approval as one finished span.

    The span has the two moments as its start and end (an end before the
    start, from clocks in two processes, is clamped to the start). `context`
    places it in the saga's trace; by default it is a child of the current span.
    """
    attributes = safe_attributes(
        {
            names.ATTR_SAGA_ID: saga_id,
            names.ATTR_VERSION: version,
            names.ATTR_VERSION_DIGEST: version_digest,
            names.ATTR_APPROVER: approver,
        }
    )
    span = tracer().start_span(
        names.APPROVAL_WAIT, context=context, attributes=attributes, start_time=ready_at_ns
    )
    span.end(end_time=max(approved_at_ns, ready_at_ns))
    return span.get_span_context()


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


__all__ = [
    "MAX_VALUE_CHARS",
    "SENSITIVE_WORDS",
    "ActionAttrs",
    "Attrs",
    "action_span",
    "annotate",
    "approval_wait_span",
    "as_attributes",
    "current_tracer_provider",
    "recording",
    "destination_attribute",
    "is_sensitive_key",
    "mark_error",
    "open_span",
    "phase",
    "safe_attributes",
    "to_ns",
    "tracer",
    "use_tracer_provider",
]

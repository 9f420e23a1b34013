"""One saga, one trace: spans for work started outside any message join the saga's trace.

A saga's trace context is stored with it when it is submitted; a person's
command, the API or the sweeper opens its span as a child of that context
when no trace is current. The stored context is asked for only then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from opentelemetry import trace

from telemetry import names, propagation, spans


class TracedSaga(Protocol):
    """What a saga row shows of itself to its trace: its id and its stored trace context."""

    @property
    def id(self) -> str: ...

    @property
    def trace_context(self) -> Mapping[str, str] | None: ...


@contextmanager
def saga_span(name: str, saga: TracedSaga | None, attrs: dict[str, Any] | None = None) -> Iterator[None]:
    """A span in the saga's own trace, for work started outside any message
    (a CLI command, the API, the sweeper): one saga is one trace."""
    saga_id = saga.id if saga is not None else None

    def carried() -> dict[str, str] | None:
        held = saga.trace_context if saga is not None else None
        return dict(held) if held else None

    with in_saga_trace(name, saga_id, carried, attrs):
        yield


@contextmanager
def in_saga_trace(
    name: str,
    saga_id: str | None,
    trace_context: Callable[[], dict[str, str] | None],
    attrs: dict[str, Any] | None = None,
) -> Iterator[None]:
    """The span, parented on the saga's trace when no trace is current (the saga's trace
    context is asked for only then)."""
    parent = None
    if not trace.get_current_span().get_span_context().is_valid:
        carried = trace_context()
        parent = propagation.extract_context(carried) if carried else None
    attributes = {names.ATTR_SAGA_ID: saga_id} if saga_id is not None else {}
    with spans.open_span(name, {**attributes, **(attrs or {})}, context=parent):
        yield


__all__ = ["TracedSaga", "in_saga_trace", "saga_span"]

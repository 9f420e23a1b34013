"""What the saga page offers an operator, and the trace link. Pure: no I/O.

- `operator_actions(state, step_states, head_version)`: which of `cancel`,
  `retry`, `reconcile` and `fork` the saga's state allows, read from the
  saga machine's transition table (`sagas.machine.TRANSITIONS`) so a button
  is shown exactly when the service would accept it. Whether the visitor may
  use them (the `operator` role) is the page's question (`Viewer.holds`).
- `trace_id_of(context)`: the W3C trace id in a saga's stored trace context
  (`traceparent`), or None.
- `trace_href(template, trace_id)`: `PRESSROOM_TRACE_URL` with `{trace_id}`
  filled in, or None when either is missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote

from sagas.machine import TRANSITIONS, SagaEvent, SagaState

# W3C traceparent: version-traceid-parentid-flags; an all-zero trace id is invalid.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
_UNSETTLED = frozenset({"uncertain", "compensation-failed"})


def _allows(state: str, event: SagaEvent) -> bool:
    try:
        return (SagaState(state), event) in TRANSITIONS
    except ValueError:  # a state this build does not know: offer nothing
        return False


def operator_actions(state: str, step_states: Iterable[str], head_version: int | None) -> frozenset[str]:
    """The operator's actions this saga's state allows now."""
    steps = set(step_states)
    actions: set[str] = set()
    if _allows(state, SagaEvent.CANCELLED):
        actions.add("cancel")
    if _allows(state, SagaEvent.RETRIED) or (
        state == SagaState.EFFECT_UNKNOWN and "compensation-failed" in steps
    ):
        actions.add("retry")  # a failed saga, or an undo that failed
    if _allows(state, SagaEvent.RECONCILED) and steps & _UNSETTLED:
        actions.add("reconcile")
    if head_version:
        actions.add("fork")
    return frozenset(actions)


def trace_id_of(context: Mapping[str, str] | None) -> str | None:
    """The trace id of a stored W3C context, or None (no tracing when the saga began)."""
    found = _TRACEPARENT.fullmatch(str((context or {}).get("traceparent", "")).strip().lower())
    if found is None or set(found.group(1)) == {"0"}:
        return None
    return found.group(1)


def trace_href(template: str | None, trace_id: str | None) -> str | None:
    """The link to the trace in the tracing UI, or None."""
    if not template or not trace_id:
        return None
    return template.replace("{trace_id}", quote(trace_id, safe=""))


__all__ = ["operator_actions", "trace_href", "trace_id_of"]

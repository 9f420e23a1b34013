"""What `pressroom trace` draws: a phase waterfall per action and the span tree.

The waterfall reads the events table (dicts as the store returns them). An
action's event carries four moments, each the moment its phase began:
`proposed_at` (proposal), `authorized_at` (authorization), `sent_at` (send)
and `acked_at` (ack). A phase lasts until the next moment present; the last
one lasts until `created_at`, when the event row was written after it. A
phase with no moment did not happen. Bars are placed relative to the saga's
first moment.

The span tree reads the JSON lines the `file` exporter writes
(`read_span_file`), grouped by trace. Formatting only: no OpenTelemetry SDK,
no I/O beyond reading that file and printing to the console given.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from telemetry import names
from telemetry.spans import is_sensitive_key

STAMP_FIELDS: Final = {
    names.PROPOSAL: "proposed_at",
    names.AUTHORIZATION: "authorized_at",
    names.SEND: "sent_at",
    names.ACK: "acked_at",
}
PHASE_STYLES: Final = {
    names.PROPOSAL: "cyan",
    names.AUTHORIZATION: "yellow",
    names.SEND: "magenta",
    names.ACK: "green",
}
STATUS_STYLES: Final = {
    "ok": "green",
    "replayed": "green",
    "error": "red",
    "rejected": "red",
    "uncertain": "bold yellow",
    "approval_required": "blue",
}
BAR_WIDTH: Final = 20
_DETAIL_CHARS: Final = 60

Bounds = tuple[datetime, datetime | None]
"""A phase's start and end; the end is None when unknown."""
_MS: Final = timedelta(milliseconds=1)


def parse_moment(value: object) -> datetime | None:
    """A datetime or ISO-8601 string as an aware datetime (naive means UTC)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def phase_bounds(event: Mapping[str, Any]) -> dict[str, Bounds | None]:
    """Each phase's (start, end), None for a phase that did not happen."""
    starts = [(phase, parse_moment(event.get(field))) for phase, field in STAMP_FIELDS.items()]
    written = parse_moment(event.get("created_at"))
    bounds: dict[str, Bounds | None] = {}
    for index, (phase, start) in enumerate(starts):
        if start is None:
            bounds[phase] = None
            continue
        later = [moment for _, moment in starts[index + 1 :] if moment is not None]
        end = later[0] if later else written
        bounds[phase] = (start, end if end is not None and end >= start else None)
    return bounds


def phase_durations(event: Mapping[str, Any]) -> dict[str, float | None]:
    """Each phase's duration in milliseconds; None when it did not happen or has no end."""
    durations: dict[str, float | None] = {}
    for phase, bound in phase_bounds(event).items():
        if bound is None or bound[1] is None:
            durations[phase] = None
        else:
            durations[phase] = (bound[1] - bound[0]) / _MS
    return durations


def read_span_file(path: Path) -> list[dict[str, Any]]:
    """The spans a `file` exporter wrote; [] when there is no file yet.

    A line cut short (a process killed mid-write) is skipped, not fatal.
    """
    if not path.exists():
        return []
    found: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def spans_for_saga(spans: Iterable[Mapping[str, Any]], saga_id: str) -> list[dict[str, Any]]:
    """Every span of the traces in which some span carries `pressroom.saga.id == saga_id`."""
    listed = [dict(span) for span in spans]
    traces = {
        span.get("trace_id")
        for span in listed
        if (span.get("attributes") or {}).get(names.ATTR_SAGA_ID) == saga_id
    }
    return [span for span in listed if span.get("trace_id") in traces]


def render_waterfall(
    events: list[dict[str, Any]],
    spans: list[dict[str, Any]] | None = None,
    console: Console | None = None,
) -> None:
    """Print the phase waterfall of `events` and, when given, the span tree of `spans`."""
    out = console if console is not None else Console()
    if events:
        out.print(waterfall_table(events))
    else:
        out.print("no events")
    if spans:
        out.print(span_trees(spans))


PHASE_HEADERS = {"proposal": "prop", "authorization": "auth", "send": "send", "ack": "ack"}


def waterfall_table(events: list[dict[str, Any]]) -> Table:
    """One row per event: its phases as bars on the saga's timeline, and their durations."""
    moments = [
        moment
        for event in events
        for field in ("created_at", *STAMP_FIELDS.values())
        if (moment := parse_moment(event.get(field))) is not None
    ]
    origin = min(moments, default=datetime.fromtimestamp(0, UTC))
    total_ms = (max(moments, default=origin) - origin) / _MS
    saga = next((str(event["saga_id"]) for event in events if event.get("saga_id")), "-")
    table = Table(
        title=f"saga {saga}: {len(events)} events over {total_ms:.1f} ms",
        caption="phases: prop = proposal, auth = authorization, send, ack; durations in ms; "
        "start is the offset from the saga's first moment",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    table.add_column("start", justify="right", no_wrap=True)
    table.add_column("event", overflow="fold", min_width=30)
    table.add_column("status", no_wrap=True, max_width=12, overflow="ellipsis")
    table.add_column("phases", no_wrap=True, width=BAR_WIDTH)
    for phase in names.PHASES:
        # Short headers keep the table readable in an 80-column terminal.
        table.add_column(Text(PHASE_HEADERS[phase], style=PHASE_STYLES[phase]), justify="right", no_wrap=True)
    for event in events:
        table.add_row(*_row(event, origin, total_ms))
    return table


def _row(event: Mapping[str, Any], origin: datetime, total_ms: float) -> list[Text]:
    bounds = phase_bounds(event)
    starts = [bound[0] for bound in bounds.values() if bound is not None]
    written = parse_moment(event.get("created_at"))
    first = min(starts) if starts else written
    offset = Text(f"+{(first - origin) / _MS:.1f}" if first is not None else "-")
    label = Text(str(event.get("kind") or "event"), style="bold")
    if event.get("tool"):
        label.append(f" {event['tool']}")
    label.append(f" · {event.get('actor') or '-'}", style="dim")
    reason = (event.get("detail") or {}).get("reason") if isinstance(event.get("detail"), Mapping) else None
    if reason:
        label.append(f"\n{reason}", style="dim italic")
    status = str(event.get("status") or "-")
    cells = [Text(_ms(ms)) for ms in phase_durations(event).values()]
    # An event with no phases (a state change, a submission) is a point in time.
    marker = written if not starts else None
    bar = _bar(bounds, marker, origin, total_ms)
    return [offset, label, Text(status, style=STATUS_STYLES.get(status, "")), bar, *cells]


def _bar(
    bounds: Mapping[str, Bounds | None], marker: datetime | None, origin: datetime, total_ms: float
) -> Text:
    scale = (BAR_WIDTH - 1) / total_ms if total_ms > 0 else 0.0
    cells: list[tuple[str, str]] = [("·", "dim")] * BAR_WIDTH

    def column(moment: datetime) -> int:
        return min(BAR_WIDTH - 1, max(0, round((moment - origin) / _MS * scale)))

    for phase, bound in bounds.items():
        if bound is None:
            continue
        first = column(bound[0])
        last = column(bound[1]) if bound[1] is not None else first
        for index in range(first, max(last, first + 1)):
            cells[index] = ("█", PHASE_STYLES[phase])
    if marker is not None:
        cells[column(marker)] = ("◆", "bold")
    bar = Text()
    for char, style in cells:
        bar.append(char, style=style)
    return bar


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _detail_text(detail: object) -> str:
    if not isinstance(detail, Mapping):
        return ""
    parts = [
        f"{key}={value}"
        for key, value in detail.items()
        if isinstance(value, str | int | float | bool) and not is_sensitive_key(str(key))
    ]
    text = " ".join(parts)
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def span_trees(spans: Iterable[Mapping[str, Any]]) -> Group:
    """One tree per trace: span name, service, start offset from the trace's first span and
    duration, children under parents; a `process` span also shows how long its message
    waited since it was sent (or, never sent on its own, since it was created)."""
    by_trace: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for span in spans:
        by_trace[str(span.get("trace_id"))].append(span)
    ordered = sorted(by_trace.items(), key=lambda item: min(_start(span) for span in item[1]))
    return Group(*(_trace_tree(trace_id, group) for trace_id, group in ordered))


def _trace_tree(trace_id: str, group: list[Mapping[str, Any]]) -> Tree:
    ids = {span.get("span_id") for span in group}
    children: dict[object, list[Mapping[str, Any]]] = defaultdict(list)
    roots: list[Mapping[str, Any]] = []
    for span in sorted(group, key=_start):
        parent = span.get("parent_span_id")
        if parent in ids and parent != span.get("span_id"):
            children[parent].append(span)
        else:
            roots.append(span)
    tree = Tree(Text(f"trace {trace_id}", style="bold"))
    seen: set[object] = set()
    origin = min((_start(span) for span in group), default=0)
    handed = _handed_over(group)

    def add(node: Tree, span: Mapping[str, Any]) -> None:
        seen.add(span.get("span_id"))
        branch = node.add(_span_label(span, origin, handed))
        for child in children.get(span.get("span_id"), []):
            if child.get("span_id") not in seen:
                add(branch, child)

    for root in roots:
        add(tree, root)
    return tree


def _handed_over(group: list[Mapping[str, Any]]) -> dict[str, int]:
    """Per message id, when it left for the queue: the end of its `send` span, else of its `create`."""
    created: dict[str, int] = {}
    sent: dict[str, int] = {}
    for span in group:
        attrs = span.get("attributes") or {}
        message, op, end = (
            attrs.get(names.MESSAGING_MESSAGE_ID),
            attrs.get(names.MESSAGING_OPERATION_TYPE),
            span.get("end_ns"),
        )
        if not isinstance(message, str) or not isinstance(end, int):
            continue
        if op == names.OP_SEND:
            sent[message] = max(end, sent.get(message, end))
        elif op == names.OP_CREATE:
            created[message] = end
    return {**created, **sent}


def _span_label(span: Mapping[str, Any], origin: int = 0, handed: Mapping[str, int] | None = None) -> Text:
    label = Text(str(span.get("name", "?")), style="bold")
    label.append(f"  [{span.get('service') or '?'}]", style="dim")
    start, end = span.get("start_ns"), span.get("end_ns")
    if isinstance(start, int):
        label.append(f"  +{(start - origin) / 1e6:.1f} ms", style="cyan")
    if isinstance(start, int) and isinstance(end, int):
        label.append(f"  {(end - start) / 1e6:.1f} ms")
    attrs = span.get("attributes") or {}
    message = attrs.get(names.MESSAGING_MESSAGE_ID)
    if attrs.get(names.MESSAGING_OPERATION_TYPE) == names.OP_PROCESS and isinstance(start, int):
        left = (handed or {}).get(message) if isinstance(message, str) else None
        if left is not None:
            label.append(f"  queue wait {max(start - left, 0) / 1e6:.1f} ms", style="yellow")
    status = span.get("status") or {}
    if isinstance(status, Mapping) and status.get("code") == "ERROR":
        label.append(f"  ERROR {status.get('description') or ''}".rstrip(), style="red")
    links = span.get("links") or []
    if links:
        label.append(f"  ({len(links)} link{'s' if len(links) > 1 else ''})", style="dim")
    return label


def _start(span: Mapping[str, Any]) -> int:
    start = span.get("start_ns")
    return start if isinstance(start, int) else 0


__all__ = [
    "BAR_WIDTH",
    "PHASE_STYLES",
    "STAMP_FIELDS",
    "parse_moment",
    "phase_bounds",
    "phase_durations",
    "read_span_file",
    "render_waterfall",
    "span_trees",
    "spans_for_saga",
    "waterfall_table",
]

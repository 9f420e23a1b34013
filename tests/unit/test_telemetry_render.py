"""The phase waterfall and the span tree that `pressroom trace` prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console

from telemetry import names
from telemetry.render import phase_durations, render_waterfall, spans_for_saga

T0 = datetime(2025, 3, 1, 9, 0, 0, tzinfo=UTC)


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def action_event(**overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event_id": "e-1",
        "saga_id": "s-1",
        "kind": "tool_call",
        "status": "ok",
        "actor": "publisher",
        "tool": "site.publish",
        "created_at": at(60),
        "proposed_at": at(0),
        "authorized_at": at(5),
        "sent_at": at(12.5),
        "acked_at": at(52.5),
        "detail": {"call_id": "c-1", "approval_token": "v1.secret-token"},
    }
    event.update(overrides)
    return event


def test_phase_durations_run_from_each_moment_to_the_next() -> None:
    assert phase_durations(action_event()) == {
        names.PROPOSAL: 5.0,
        names.AUTHORIZATION: 7.5,
        names.SEND: 40.0,
        names.ACK: 7.5,
    }


def test_phase_durations_accept_iso_strings_and_missing_phases() -> None:
    event = action_event(
        proposed_at=at(0).isoformat(),
        authorized_at=at(3).replace(tzinfo=None).isoformat(),  # naive means UTC
        sent_at=None,
        acked_at=None,
        created_at=at(4).isoformat(),
    )
    assert phase_durations(event) == {
        names.PROPOSAL: 3.0,
        names.AUTHORIZATION: 1.0,
        names.SEND: None,
        names.ACK: None,
    }


def test_last_phase_without_a_later_row_time_has_no_duration() -> None:
    event = action_event(created_at=at(-10))
    assert phase_durations(event)[names.ACK] is None


def test_waterfall_shows_phases_and_durations() -> None:
    console = Console(record=True, width=120)
    events = [
        {
            "event_id": "e-0",
            "saga_id": "s-1",
            "kind": "saga_submitted",
            "status": "ok",
            "actor": "alice",
            "tool": None,
            "created_at": at(-20),
            "proposed_at": None,
            "authorized_at": None,
            "sent_at": None,
            "acked_at": None,
            "detail": {},
        },
        action_event(),
    ]
    render_waterfall(events, console=console)
    text = console.export_text()
    for phase in names.PHASES:
        assert phase in text
    for duration in ("5.0", "7.5", "40.0"):
        assert duration in text
    assert "site.publish" in text
    assert "saga s-1" in text
    assert "+20.0" in text  # the action starts 20 ms after the saga's first moment
    assert "secret-token" not in text
    assert "publisher" in text  # who acted


def test_waterfall_without_events() -> None:
    console = Console(record=True, width=120)
    render_waterfall([], console=console)
    assert "no events" in console.export_text()


def span(name: str, span_id: str, parent: str | None, start: int, end: int, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": name,
        "service": "pressroom-worker-publisher",
        "trace_id": "a" * 32,
        "span_id": span_id,
        "parent_span_id": parent,
        "kind": "INTERNAL",
        "start_ns": start,
        "end_ns": end,
        "attributes": {},
        "status": {"code": "UNSET", "description": None},
        "events": [],
        "links": [],
    }
    record.update(extra)
    return record


def test_span_tree_groups_by_trace() -> None:
    spans = [
        span("process publisher", "01", None, 0, 9_000_000, links=[{"trace_id": "a" * 32, "span_id": "00"}]),
        span("action site.publish", "02", "01", 1_000_000, 8_000_000),
        span("send", "03", "02", 2_000_000, 6_000_000, status={"code": "ERROR", "description": "Timeout"}),
        span("other", "09", None, 0, 1, trace_id="b" * 32),
    ]
    console = Console(record=True, width=120)
    render_waterfall([action_event()], spans=spans, console=console)
    text = console.export_text()
    assert f"trace {'a' * 32}" in text
    assert f"trace {'b' * 32}" in text
    assert "process publisher" in text and "(1 link)" in text
    assert "pressroom-worker-publisher" in text
    assert "4.0 ms" in text
    assert "ERROR Timeout" in text
    assert text.index("action site.publish") < text.index("send  [")


def test_spans_for_saga_keeps_whole_traces() -> None:
    mine = span("action x", "01", None, 0, 1, attributes={names.ATTR_SAGA_ID: "s-1"})
    sibling = span("send", "02", "01", 0, 1)
    other = span("action y", "03", None, 0, 1, trace_id="c" * 32, attributes={names.ATTR_SAGA_ID: "s-2"})
    assert spans_for_saga([mine, sibling, other], "s-1") == [mine, sibling]


def test_span_tree_shows_start_offsets_and_queue_waits() -> None:
    message = {names.MESSAGING_MESSAGE_ID: "m-1"}
    spans = [
        span(
            "create publisher",
            "01",
            None,
            1_000_000,
            2_000_000,
            attributes={**message, names.MESSAGING_OPERATION_TYPE: names.OP_CREATE},
        ),
        span(
            "send publisher",
            "02",
            "01",
            3_000_000,
            4_000_000,
            attributes={**message, names.MESSAGING_OPERATION_TYPE: names.OP_SEND},
        ),
        span(
            "process publisher",
            "03",
            "01",
            29_000_000,
            40_000_000,
            attributes={**message, names.MESSAGING_OPERATION_TYPE: names.OP_PROCESS},
        ),
        span(
            "process reviewer",
            "04",
            "01",
            45_000_000,
            46_000_000,
            attributes={names.MESSAGING_MESSAGE_ID: "m-2", names.MESSAGING_OPERATION_TYPE: names.OP_PROCESS},
        ),
    ]
    console = Console(record=True, width=160)
    render_waterfall([], spans=spans, console=console)
    lines = console.export_text().splitlines()
    create = next(line for line in lines if "create publisher" in line)
    process = next(line for line in lines if "process publisher" in line)
    orphan = next(line for line in lines if "process reviewer" in line)
    assert "+0.0 ms" in create and "1.0 ms" in create
    assert "+28.0 ms" in process and "11.0 ms" in process
    assert "queue wait 25.0 ms" in process  # from the end of its send to the start of its process
    assert "+44.0 ms" in orphan and "queue wait" not in orphan  # its send is not in the file

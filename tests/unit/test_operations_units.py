"""Pure pieces of the operators' work: durations, page cursors, the retention
schedule, and the new metrics read back through an in-memory reader."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from orchestrator.core.config import Settings
from orchestrator.core.durations import parse_duration, seconds
from orchestrator.core.errors import InvalidInput
from orchestrator.reads.read_shapes import check_limit, decode_cursor, encode_cursor
from orchestrator.retention import RetentionSchedule
from telemetry import metrics, names, setup


def test_durations() -> None:
    assert parse_duration("90") == timedelta(seconds=90)
    assert parse_duration("30m") == timedelta(minutes=30)
    assert parse_duration(" 7d ") == timedelta(days=7)
    assert seconds(12) == 12.0 and seconds("2h") == 7200.0
    for bad in ("", "soon", "-1s", "0", "1w"):
        with pytest.raises(InvalidInput):
            parse_duration(bad)


def test_settings_take_durations() -> None:
    s = Settings(retention="30d", review_reminder="4h", reconcile_window="2d")
    assert (s.retention, s.review_reminder, s.reconcile_window) == (30 * 86400.0, 4 * 3600.0, 2 * 86400.0)
    assert Settings().retention is None and Settings().reconcile_window == 7 * 86400.0
    with pytest.raises(ValueError, match="not a duration"):
        Settings(retention="later")


def test_cursor_round_trip_and_refusals() -> None:
    moment = datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)
    assert decode_cursor(encode_cursor(moment, "abc123")) == (moment, "abc123")
    for bad in ("", "nope", encode_cursor(moment, "x")[:-3] + "!!!"):
        with pytest.raises(InvalidInput):
            decode_cursor(bad)
    assert check_limit(None) == 200 and check_limit(1000) == 1000
    for bad in (0, -1, 1001):
        with pytest.raises(InvalidInput):
            check_limit(bad)


def test_retention_schedule_runs_first_then_every_interval() -> None:
    now = [100.0]
    schedule = RetentionSchedule(3600, clock=lambda: now[0])
    assert schedule.due() is True
    assert schedule.due() is False
    now[0] += 3599
    assert schedule.due() is False
    now[0] += 1
    assert schedule.due() is True


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    memory = InMemoryMetricReader()
    assert setup.configure_metrics("pressroom-test", memory, force=True, set_global=False) is not None
    yield memory
    metrics.set_overdue_reviews_counter(None)
    setup.shutdown()


def test_dead_letter_pruned_and_overdue_metrics(reader: InMemoryMetricReader) -> None:
    metrics.record_dead_letter("researcher")
    metrics.record_dead_letter(None)
    metrics.record_pruned("events", 40)
    metrics.record_pruned("inbox", 0)
    metrics.set_overdue_reviews_counter(lambda: 3)
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list] = {}  # type: ignore[type-arg]
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    dead = {p.attributes[names.MESSAGING_DESTINATION_NAME]: p.value for p in found[names.METRIC_DEAD_LETTERS]}
    assert dead == {"researcher": 1, "unknown": 1}
    assert [(p.attributes, p.value) for p in found[names.METRIC_PRUNED]] == [
        ({names.ATTR_TABLE: "events"}, 40)
    ]
    assert [p.value for p in found[names.METRIC_REVIEWS_OVERDUE]] == [3]

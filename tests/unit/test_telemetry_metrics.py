"""Metric instruments, read back through an in-memory reader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint

from telemetry import metrics, names, setup


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    memory = InMemoryMetricReader()
    assert setup.configure_metrics("pressroom-test", memory, force=True, set_global=False) is not None
    yield memory
    metrics.set_saga_state_counter(None)
    setup.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[Any]] = {}
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def test_histograms_and_counter_are_recorded(reader: InMemoryMetricReader) -> None:
    metrics.record_saga_finished("succeeded", 12.5)
    metrics.record_approval_wait(600.0)
    metrics.record_outbox_lag(0.02, "publisher")
    metrics.record_outbox_lag(-0.001, "publisher")  # clock skew between processes
    metrics.record_destination_latency("webhook", 0.3, "ok")
    metrics.record_effect_unknown("webhook")
    metrics.record_effect_unknown("webhook")

    found = points(reader)
    (saga,) = found[names.METRIC_SAGA_DURATION]
    assert isinstance(saga, HistogramDataPoint)
    assert (saga.count, saga.sum) == (1, 12.5)
    assert saga.attributes == {names.ATTR_SAGA_STATE: "succeeded"}
    (lag,) = found[names.METRIC_OUTBOX_LAG]
    assert (lag.count, lag.sum, lag.min) == (2, 0.02, 0.0)
    assert lag.attributes == {names.MESSAGING_DESTINATION_NAME: "publisher"}
    (latency,) = found[names.METRIC_DESTINATION_DURATION]
    assert latency.attributes == {names.ATTR_DESTINATION_SCHEME: "webhook", names.ATTR_OUTCOME: "ok"}
    (wait,) = found[names.METRIC_APPROVAL_WAIT]
    assert wait.sum == 600.0
    (unknown,) = found[names.METRIC_EFFECT_UNKNOWN]
    assert isinstance(unknown, NumberDataPoint)
    assert unknown.value == 2


def test_histograms_use_second_sized_buckets(reader: InMemoryMetricReader) -> None:
    metrics.record_outbox_lag(0.02, "writer")
    (lag,) = points(reader)[names.METRIC_OUTBOX_LAG]
    assert lag.explicit_bounds[0] < 0.1


def test_sagas_by_state_come_from_the_registered_callback(reader: InMemoryMetricReader) -> None:
    metrics.set_saga_state_counter(lambda: {"executing": 2, "effect-unknown": 1})
    observed = {
        point.attributes[names.ATTR_SAGA_STATE]: point.value for point in points(reader)[names.METRIC_SAGAS]
    }
    assert observed == {"executing": 2, "effect-unknown": 1}


def test_disabled_sdk_installs_no_meter_provider() -> None:
    try:
        assert (
            setup.configure_metrics("pressroom-test", env={"OTEL_SDK_DISABLED": "true"}, force=True) is None
        )
        metrics.record_effect_unknown("site")  # a no-op, not an error
    finally:
        setup.shutdown()


def test_metrics_are_off_unless_configured() -> None:
    try:
        assert setup.configure_metrics("pressroom-test", env={}, force=True, set_global=False) is None
    finally:
        setup.shutdown()

"""Reading the OpenTelemetry SDK's in-memory metrics in tests."""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import InMemoryMetricReader


def counted(reader: InMemoryMetricReader, name: str) -> int:
    """The sum of every data point of the metric `name` the reader holds."""
    data = reader.get_metrics_data()
    return sum(
        int(point.value)
        for rm in (data.resource_metrics if data else [])
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    )

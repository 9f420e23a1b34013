"""Providers from OTEL_* mappings, the file exporter, fork and shutdown."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from telemetry import names, setup, spans
from telemetry.export import JsonLinesSpanExporter, build_span_exporter
from telemetry.render import read_span_file
from telemetry.setup import TelemetrySettings


@pytest.fixture(autouse=True)
def clean_state() -> Iterator[None]:
    setup.shutdown()
    yield
    setup.shutdown()


def make_action() -> None:
    with spans.action_span("site.publish", {names.ATTR_SAGA_ID: "s-1"}):
        for name in names.PHASES:
            with spans.phase(name):
                pass


def test_disabled_sdk_records_nothing() -> None:
    env = {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "memory"}
    assert setup.configure_tracing("pressroom-test", env=env, set_global=False) is None
    with spans.action_span("site.publish") as span:
        assert not span.is_recording()
        assert not span.get_span_context().is_valid
    assert setup.memory_exporter() is None


def test_tracing_is_off_unless_configured() -> None:
    assert setup.configure_tracing("pressroom-test", env={}, set_global=False) is None
    assert setup.configure_tracing("pressroom-test", env={"OTEL_TRACES_EXPORTER": "none"}) is None


def test_memory_exporter_from_env_and_service_name_override() -> None:
    env = {"OTEL_TRACES_EXPORTER": "memory", "OTEL_SERVICE_NAME": "svc-from-env"}
    provider = setup.configure_tracing("pressroom-api", env=env, set_global=False)
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "svc-from-env"
    assert setup.configure_tracing("pressroom-api", env=env, set_global=False) is provider

    make_action()
    exporter = setup.memory_exporter()
    assert exporter is not None
    assert len(exporter.get_finished_spans()) == 5


def test_force_replaces_the_provider() -> None:
    first = setup.configure_tracing("pressroom-api", exporter="memory", set_global=False)
    second = setup.configure_tracing("pressroom-relay", exporter="memory", force=True, set_global=False)
    assert second is not None and second is not first
    assert second.resource.attributes["service.name"] == "pressroom-relay"


def test_file_exporter_writes_json_lines_across_shutdown(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "spans.jsonl"
    setup.configure_tracing("pressroom-worker-writer", exporter="file", file_path=path, set_global=False)
    make_action()
    setup.shutdown()
    setup.configure_tracing("pressroom-relay", exporter="file", file_path=path, set_global=False)
    with spans.action_span("relay.publish"):
        pass
    setup.shutdown()

    lines = path.read_text().splitlines()
    assert len(lines) == 6
    records = [json.loads(line) for line in lines]
    assert {record["service"] for record in records} == {"pressroom-worker-writer", "pressroom-relay"}
    action = next(r for r in records if r["name"] == "action site.publish")
    phases = [r for r in records if r["name"] in names.PHASES]
    assert [r["name"] for r in phases] == list(names.PHASES)
    assert all(r["parent_span_id"] == action["span_id"] for r in phases)
    assert all(r["trace_id"] == action["trace_id"] and len(r["trace_id"]) == 32 for r in phases)
    assert action["parent_span_id"] is None
    assert action["attributes"][names.ATTR_SAGA_ID] == "s-1"
    assert action["kind"] == "INTERNAL"
    assert action["status"]["code"] == "UNSET"
    assert action["end_ns"] >= action["start_ns"]
    assert set(action) >= {"events", "links"}


def test_read_span_file_skips_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text('{"name": "send", "trace_id": "ab"}\n{"name": "ack", "tra\n\n')
    assert read_span_file(path) == [{"name": "send", "trace_id": "ab"}]
    assert read_span_file(tmp_path / "missing.jsonl") == []


def test_file_exporter_needs_a_path() -> None:
    with pytest.raises(ValueError, match="file_path"):
        setup.configure_tracing("pressroom-test", exporter="file", set_global=False)


def test_settings_from_env_mapping() -> None:
    settings = TelemetrySettings.from_env_mapping(
        {
            "OTEL_TRACES_EXPORTER": "otlp, console,none",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc",
        }
    )
    assert settings == TelemetrySettings(
        traces_exporters=("otlp", "console"),
        metrics_exporters=("otlp",),
        traces_protocol="http/protobuf",
        metrics_protocol="grpc",
    )
    assert TelemetrySettings.from_env_mapping({}) == TelemetrySettings()


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "zipkin"},
        {"OTEL_METRICS_EXPORTER": "prometheus"},
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
    ],
)
def test_settings_refuse_what_they_cannot_do(env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        TelemetrySettings.from_env_mapping(env)


def test_otlp_protocol_picks_the_official_exporter(tmp_path: Path) -> None:
    grpc = build_span_exporter("otlp", protocol="grpc")
    http = build_span_exporter("otlp", protocol="http/protobuf")
    file = build_span_exporter("file", file_path=tmp_path / "s.jsonl")
    try:
        assert isinstance(grpc, GrpcSpanExporter)
        assert isinstance(http, HttpSpanExporter)
        assert isinstance(file, JsonLinesSpanExporter)
    finally:
        for exporter in (grpc, http, file):
            exporter.shutdown()


def test_configure_after_fork_rebuilds_as_the_parent_asked() -> None:
    parent = setup.configure_tracing("pressroom-worker", exporter="memory", set_global=False)
    parent_memory = setup.memory_exporter()

    child = setup.configure_after_fork("pressroom-worker-writer")
    assert child is not None and child is not parent
    assert child.resource.attributes["service.name"] == "pressroom-worker-writer"
    make_action()
    child_memory = setup.memory_exporter()
    assert isinstance(child_memory, InMemorySpanExporter) and child_memory is not parent_memory
    assert len(child_memory.get_finished_spans()) == 5
    assert parent_memory is not None and parent_memory.get_finished_spans() == ()


def test_configure_after_fork_can_be_given_the_environment() -> None:
    assert setup.configure_tracing("pressroom-worker", env={}, set_global=False) is None
    assert setup.configure_after_fork("pressroom-worker-writer") is None

    env = {"OTEL_TRACES_EXPORTER": "memory"}
    child = setup.configure_after_fork("pressroom-worker-writer", env=env)
    assert child is not None
    make_action()
    exporter = setup.memory_exporter()
    assert exporter is not None and len(exporter.get_finished_spans()) == 5


def test_span_helpers_do_not_load_the_sdk() -> None:
    code = (
        "import sys, telemetry\n"
        "from telemetry import spans, propagation, metrics\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'rich', 'grpc')))\n"
        "print(loaded)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"

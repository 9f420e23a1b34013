"""The shape of a saga's trace, read from the in-memory exporter: every action's
phases are siblings under `action <tool>`, and every publish, status and
compensation names its destination on the action and on all four phases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from telemetry import names, setup
from tests.integration.helpers import make_app, ready_saga
from tests.support.webhook_server import WebhookServer

PUBLISH_TOOLS = ("publish", "publish.status", "publish.compensate")


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    exporter = setup.install_in_memory()
    yield exporter
    setup.shutdown()


def _children(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _actions(spans: tuple[ReadableSpan, ...]) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(names.ACTION + " ")]


def test_every_tool_has_its_phases_as_siblings(
    memory: InMemorySpanExporter, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(f"sqlite:///{tmp_path / 'p.db'}", tmp_path)
    sid = ready_saga(app, corpus, [f"site:{tmp_path / 'site'}"])["saga_id"]
    app.reviews.approve(sid, version=1, actor="erin")

    finished = memory.get_finished_spans()
    actions = _actions(finished)
    tools = {a.name.removeprefix("action ") for a in actions}
    assert {"publish", "draft.write"} <= tools and len(tools) >= 4, tools
    phase_names = set(names.PHASES)
    for action in actions:
        phases = [c for c in _children(finished, action) if c.name in phase_names]
        assert [p.name for p in phases][:2] == [names.PROPOSAL, names.AUTHORIZATION], action.name
        for p in phases:
            nested = [c.name for c in _children(finished, p) if c.name in phase_names]
            assert nested == [], f"{action.name}: {nested} inside {p.name}"
    # A read-only tool that ran has all four phases side by side under its action.
    reads = [a for a in actions if a.attributes and a.attributes.get(names.ATTR_RISK) == "read_only"]
    complete = [a for a in reads if {c.name for c in _children(finished, a)} >= phase_names]
    assert complete, "no read-only action with four sibling phases"


def test_publish_status_and_compensate_name_their_destination(
    memory: InMemorySpanExporter, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(f"sqlite:///{tmp_path / 'p.db'}", tmp_path)
    site = f"site:{tmp_path / 'site'}"
    with WebhookServer("reject") as hook:
        url = hook.url
        secret_url = url.replace("http://", "http://user:pw@") + "?token=abc"
        sid = ready_saga(app, corpus, [site, f"webhook:{secret_url}"])["saga_id"]
        out = app.reviews.approve(sid, version=1, actor="erin")
    assert out["state"] == "failed"

    finished = memory.get_finished_spans()
    seen: dict[str, set[str]] = {}
    for action in _actions(finished):
        tool = action.name.removeprefix("action ")
        if tool not in PUBLISH_TOOLS:
            continue
        assert action.attributes is not None
        dest = str(action.attributes[names.ATTR_DESTINATION])
        seen.setdefault(tool, set()).add(dest)
        phases = [c for c in _children(finished, action) if c.name in names.PHASES]
        assert {p.name for p in phases} == set(names.PHASES), (tool, [p.name for p in phases])
        for p in phases:
            assert p.attributes is not None and p.attributes[names.ATTR_DESTINATION] == dest, (tool, p.name)
    assert seen["publish"] == {site, f"webhook:{url}"}  # two publishes told apart; no user, password or query
    assert seen["publish.compensate"] == {site}
    assert all("token" not in d and "pw" not in d for ds in seen.values() for d in ds)

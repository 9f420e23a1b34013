"""One saga is one trace across the CLI, the relay and worker processes on
Redis, with the four phases of every action; read from the span files the
processes export (OTEL_TRACES_EXPORTER=file)."""

from __future__ import annotations

import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from orchestrator.store.db import make_engine
from orchestrator.store.tables import ApprovalRow
from telemetry.render import read_span_file
from tests.conftest import base_env
from tests.integration.test_recovery import _work, big_corpus
from tests.support.processes import Processes, cli_json, saga_state, submit, wait_until

PHASES = ("proposal", "authorization", "send", "ack")


@pytest.fixture
def traced(tmp_path: Path, pg_url: str, redis_url: str):  # type: ignore[no-untyped-def]
    spans_file = tmp_path / "spans.jsonl"
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS="3",
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
        OTEL_TRACES_EXPORTER="file",
        PRESSROOM_TRACE_FILE=str(spans_file),
    )
    p = Processes(env, tmp_path)
    yield p, spans_file
    p.stop_all()


def _saga_traces(spans: list[dict[str, Any]], saga_id: str) -> set[str]:
    return {s["trace_id"] for s in spans if s["attributes"].get("pressroom.saga.id") == saga_id}


def test_one_trace_per_saga_with_four_ordered_phases(
    traced, tmp_path: Path, corpus: Path, pg_url: str
) -> None:  # type: ignore[no-untyped-def]
    procs, spans_file = traced
    env = procs.env
    procs.relay()
    procs.worker()
    sid = submit(env, corpus, f"site:{tmp_path / 'site'}")
    wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=90, what="ready-for-review")
    version = cli_json(env, "show", sid)
    cli_json(env, "approve", sid, "--version", "1", "--as", "erin")
    wait_until(lambda: saga_state(env, sid) == "succeeded", timeout=90, what="succeeded")
    procs.stop_all()  # flush every process's spans

    spans = read_span_file(spans_file)
    traces = _saga_traces(spans, sid)
    assert len(traces) == 1, f"one trace per saga, got {traces}"
    (trace_id,) = traces
    mine = [s for s in spans if s["trace_id"] == trace_id]
    services = {s["service"] for s in mine}
    assert {"pressroom-cli", "pressroom-worker-researcher-writer-reviewer-publisher"} <= services, services
    by_id = {s["span_id"]: s for s in mine}
    children: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in mine:
        children[s["parent_span_id"]].append(s)

    actions = [s for s in mine if s["name"] == "action publish"]
    assert len(actions) == 1
    action = actions[0]
    phases = {c["name"]: c for c in children[action["span_id"]]}
    assert set(PHASES) <= set(phases)
    p = [phases[name] for name in PHASES]
    assert (
        p[0]["end_ns"] <= p[1]["start_ns"]
        and p[1]["end_ns"] <= p[2]["start_ns"]
        and p[2]["end_ns"] <= p[3]["start_ns"]
    )
    assert p[2]["kind"].endswith("PRODUCER")
    attrs = {**action["attributes"], **p[2]["attributes"]}
    for key in (
        "pressroom.saga.id",
        "pressroom.version",
        "pressroom.version.digest",
        "pressroom.tool",
        "pressroom.risk",
        "pressroom.idempotency_key",
    ):
        assert key in attrs, key
    assert attrs["pressroom.version.digest"] == version["version_digest"]

    names = {s["name"] for s in mine}
    for queue in ("researcher", "writer", "reviewer", "publisher"):
        assert f"create {queue}" in names and f"process {queue}" in names and f"settle {queue}" in names
    for s in mine:
        if s["name"].startswith("process "):
            parent = by_id.get(s["parent_span_id"])
            assert parent is not None and parent["name"].startswith(("create ", "send ")) or s["links"], s[
                "name"
            ]
            assert s["attributes"]["messaging.system"] == "redis"
            assert s["attributes"]["messaging.message.id"]
    assert any(
        s["name"] == "approval wait" and s["attributes"].get("pressroom.approver") == "erin" for s in mine
    )

    with Session(make_engine(pg_url)) as db:
        token = db.exec(select(ApprovalRow.token)).one()
    text = spans_file.read_text()
    assert token not in text, "no span holds the approval token"
    sentences = [line for line in version["markdown"].splitlines() if len(line) > 40]
    assert sentences and not any(sentence in text for sentence in sentences), "no span holds document text"


def test_a_message_recovered_after_a_kill_stays_in_the_saga_trace(
    traced, tmp_path: Path, pg_url: str
) -> None:  # type: ignore[no-untyped-def]
    procs, spans_file = traced
    env = procs.env
    procs.relay()
    worker = procs.worker("worker-1")
    corpus = big_corpus(tmp_path / "big")
    # As in test_recovery: the submitter's corpus index lives elsewhere, so the worker's research
    # builds its own index of 1,500 files and the kill lands mid-task.
    submitter = {**env, "PRESSROOM_INDEX_DIR": str(tmp_path / "submitter-index")}
    sid = submit(submitter, corpus, f"site:{tmp_path / 'site'}", brief="library network branch volunteers")
    wait_until(
        lambda: any(w.holder for w in _work(pg_url, sid, "research")),
        timeout=60,
        every=0.05,
        what="research to start",
    )
    worker.kill(signal.SIGKILL)
    procs.worker("worker-2")
    wait_until(lambda: saga_state(env, sid) == "ready-for-review", timeout=120, what="ready-for-review")
    procs.stop_all()
    spans = read_span_file(spans_file)
    traces = _saga_traces(spans, sid)
    assert len(traces) == 1, traces
    mine = [s for s in spans if s["trace_id"] in traces]
    assert any(s["name"].startswith("recover ") for s in mine), "the sweeper's re-send joined the saga trace"
    assert sum(1 for s in mine if s["name"] == "process researcher") >= 1

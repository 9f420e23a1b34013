"""Model-backed roles that contribute for real, against the scripted chat-completions server.

Each role's planner comes from `model_planner_for` for a pipeline whose roles
name the profile `house`; it talks to `ScriptedModel` through the official
`openai` client (`chat_for(profile)`), and every proposal goes through the
app's real `Harness` on SQLite (PostgreSQL too for the whole chain). The saga
is submitted with its queued work left undelivered, so the model roles are the
only ones that research, write and review it; the writer's version is added
as the writer's turn adds it. Checked: what the roles record (evidence from
what was read, the model's own draft, the reviewer's judgments), what each
request carries (the contract's goal object, tools, data framing, the
profile's parameters), and what a hallucinating, injected, malformed, endless
or long-winded model is allowed to do (nothing outside its role; bounded).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from evaluation.model_scripts import ESCAPING_SOURCE, EVIL_DESTINATION
from evaluation.scripted_model import ScriptedModel
from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.core.pipeline import Pipeline, parse_pipeline
from orchestrator.harness.spec import ToolStatus
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import unit_of_work
from orchestrator.store.tables import ArtifactRow, EventRow, LedgerRow, SagaRow
from orchestrator.toolpath.engine import Caller
from orchestrator.toolpath.loop import LoopOutcome, run_loop
from roles.artifacts import Evidence
from roles.corpus import read_source
from roles.durable_model import durable_chat
from roles.kinds import kind_infos, kinds
from roles.llm_client import ChatModel, ModelReply, ModelToolCall, chat_for
from roles.llm_planner import ModelPlanner, model_planner_for, with_settings_model
from roles.model_turn import DATA_NOTICE
from roles.reviewing import parse_blocks
from roles.sentences import claims, states_something
from roles.tools import load_artifact
from roles.turn import LIMITS
from sagas import records
from sagas.machine import SagaState

BRIEF = "history of the bookmobile and the riverside branch"
PIPELINE = """
[[role]]
name = "research"
kind = "researcher"
planner = "house"

[[role]]
name = "draft"
kind = "writer"
after = ["research"]
planner = "house"

[[role]]
name = "check"
kind = "reviewer"
after = ["draft"]
planner = "house"

[model.house]
base_url = "{url}"
model = "house-model"
temperature = 0.2
seed = 7
max_tokens = 1500
"""
ROLE_TOOLS = {
    "research": ["corpus_search", "corpus_read", "evidence_record"],
    "draft": ["draft_write"],
    "check": ["corpus_read", "review_record"],
}


class Recorded:
    """A `ChatModel` that passes every request on and keeps the replies (what the model said)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.replies: list[ModelReply] = []

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply:
        reply = self.inner.complete(messages, tools, idempotency_key=idempotency_key)
        self.replies.append(reply)
        return reply

    def arguments(self, index: int = -1) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.replies[index].tool_calls[0].arguments)
        return parsed


class Contrary(Recorded):
    """The model's review, with its judgment of sentence 1 turned to `contradicted`."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply:
        reply = super().complete(messages, tools, idempotency_key=idempotency_key)
        if not reply.tool_calls or reply.tool_calls[0].name != "review_record":
            return reply
        call = reply.tool_calls[0]
        arguments = json.loads(call.arguments)
        arguments["judgments"][0] = {
            "sentence": 1,
            "verdict": "contradicted",
            "reason": "The source says 1958.",
        }
        changed = ModelToolCall(call.id, call.name, json.dumps(arguments))
        return ModelReply(reply.text, (changed,), reply.tokens)


@dataclass
class Saga:
    app: Pressroom
    id: str
    corpus: Path


@dataclass
class Turn:
    planner: ModelPlanner
    outcome: LoopOutcome
    chat: Recorded
    bodies: list[dict[str, Any]]


def make_saga(database_url: str, corpus: Path) -> Iterator[Saga]:
    app = build_app(
        Settings(database_url=database_url, broker_url="inline://", secret="s"), memory_destinations=True
    )
    app.consumer.auto_drain = False  # the queued research is never delivered: the model roles do the work
    out = app.submissions.submit(
        brief=BRIEF, corpus=str(corpus), destinations=["memory:model-roles"], actor="sam"
    )
    assert out["state"] == SagaState.PREPARING.value
    yield Saga(app, out["saga_id"], corpus)
    app.close()


@pytest.fixture
def saga(sqlite_url: str, corpus: Path) -> Iterator[Saga]:
    yield from make_saga(sqlite_url, corpus)


def pipeline(url: str) -> Pipeline:
    return parse_pipeline("house", PIPELINE.format(url=url), source="house.toml", kinds=kind_infos())


def take_turn(
    saga: Saga, script: str, role_name: str, *, chat: type[Recorded] = Recorded, **work: Any
) -> Turn:
    """One turn of the pipeline's role `role_name`, the model playing `script`."""
    with ScriptedModel(script=script, latency=0.0) as model:
        house = pipeline(model.url)
        role = house.role(role_name)
        kind = kinds()[role.kind]
        recorded = chat(chat_for(house.models["house"]))
        planner = model_planner_for(
            kind,
            role,
            house,
            recorded,
            registry=saga.app.registry,
            engine=saga.app.engine,
            saga_id=saga.id,
            **work,
        )
        caller = Caller(actor=role.name, capabilities=kind.capabilities, saga_id=saga.id)
        outcome = run_loop(saga.app.harness, planner, caller, LIMITS, sleep=lambda _: None)
        return Turn(planner, outcome, recorded, model.requests)


def researched(saga: Saga) -> str:
    turn = take_turn(saga, "faithful", "research")
    assert turn.planner.result is not None
    return str(turn.planner.result["evidence_digest"])


def written(saga: Saga) -> tuple[str, int]:
    """Research and a draft by the faithful model, added as the writer's turn adds a version."""
    evidence_digest = researched(saga)
    turn = take_turn(saga, "faithful", "draft", evidence_digest=evidence_digest)
    assert turn.planner.result is not None
    with unit_of_work(saga.app.engine) as uow:
        body = load_artifact(uow.session, str(turn.planner.result["draft_digest"]))
        row = records.add_version(
            uow.session,
            records.load_saga(uow.session, saga.id, lock=True),
            title=body["title"],
            markdown=body["markdown"],
            author="writer",
            citations=body["citations"],
            evidence_digest=evidence_digest,
        )
        return evidence_digest, row.number


def artifacts(saga: Saga, kind: str) -> list[ArtifactRow]:
    with Session(saga.app.engine) as s:
        return list(
            s.exec(select(ArtifactRow).where(ArtifactRow.saga_id == saga.id, ArtifactRow.kind == kind))
        )


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.fixture(params=["sqlite", "postgresql"])
def any_saga(request: pytest.FixtureRequest, sqlite_url: str, corpus: Path) -> Iterator[Saga]:
    url = sqlite_url if request.param == "sqlite" else request.getfixturevalue("pg_url")
    yield from make_saga(url, corpus)


def test_faithful_models_research_write_and_review_a_saga(any_saga: Saga) -> None:
    saga = any_saga
    research = take_turn(saga, "faithful", "research")
    assert research.outcome.finished and research.planner.evidence is not None
    read = {
        r.output["source"]: r.output for r in research.outcome.results if r.tool == "corpus.read" and r.output
    }
    evidence = Evidence.model_validate(research.planner.evidence)
    assert evidence.passages
    for passage in evidence.passages:  # every note is a quote of a text the model read
        assert passage.source in read and passage.source_digest == read[passage.source]["source_digest"]
        assert read[passage.source]["text"][passage.start : passage.end] == passage.text
    assert research.chat.arguments()["notes"] == [
        {"source": p.source, "source_digest": p.source_digest, "quote": p.text} for p in evidence.passages
    ]
    evidence_digest = str(research.planner.result["evidence_digest"]) if research.planner.result else ""
    assert [a.digest for a in artifacts(saga, "evidence")] == [evidence_digest]

    writer = take_turn(saga, "faithful", "draft", evidence_digest=evidence_digest)
    assert writer.outcome.finished and writer.planner.result is not None and writer.planner.failure is None
    [stored] = artifacts(saga, "draft")
    sent = writer.chat.arguments()
    assert stored.digest == writer.planner.result["draft_digest"]
    assert (stored.body["title"], stored.body["markdown"]) == (sent["title"], sent["markdown"])
    assert stored.body["citations"] == [
        {k: c[k] for k in ("marker", "source", "quote", "source_digest")} for c in sent["citations"]
    ]
    assert "From " in stored.body["markdown"]  # the model's words around its quotes
    for block in parse_blocks(stored.body["markdown"]):
        if block.kind == "paragraph":
            assert all(c.markers for c in claims(block.text) if states_something(c.text))
    for citation in stored.body["citations"]:
        source = read_source(saga.corpus, citation["source"])
        assert citation["quote"] in source.text and citation["source_digest"] == source.digest

    with unit_of_work(saga.app.engine) as uow:
        s = uow.session
        version = records.add_version(
            s,
            records.load_saga(s, saga.id, lock=True),
            title=stored.body["title"],
            markdown=stored.body["markdown"],
            author="writer",
            citations=stored.body["citations"],
            evidence_digest=evidence_digest,
        ).number
    reviewer = take_turn(saga, "faithful", "check", version=version)
    assert reviewer.outcome.finished and reviewer.planner.result is not None
    goal = json.loads(reviewer.bodies[0]["messages"][1]["content"])
    judged = reviewer.chat.arguments()
    assert [j["sentence"] for j in judged["judgments"]] == [s["index"] for s in goal["sentences"]]
    assert judged["read"] == {c["source"]: c["source_digest"] for c in stored.body["citations"]}
    [review] = artifacts(saga, "review")
    assert review.digest == reviewer.planner.result["review_digest"]
    assert (review.body["verdict"], review.body["findings"]) == ("pass", [])


def test_every_request_follows_the_contract(saga: Saga) -> None:
    research = take_turn(saga, "faithful", "research")
    evidence_digest = str(research.planner.result["evidence_digest"]) if research.planner.result else ""
    writer = take_turn(saga, "faithful", "draft", evidence_digest=evidence_digest, round=0)
    for name, turn in (("research", research), ("draft", writer)):
        for body in turn.bodies:
            assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == (
                "house-model",
                0.2,
                7,
                1500,
            )
            assert [t["function"]["name"] for t in body["tools"]] == ROLE_TOOLS[name]
            system, user, *steps = body["messages"]
            assert system["role"] == "system" and user["role"] == "user"
            goal = json.loads(user["content"])  # exactly one JSON object, nothing around it
            assert (goal["role_name"], goal["saga_id"], goal["brief"]) == (name, saga.id, BRIEF)
            for assistant, answer in zip(steps[::2], steps[1::2], strict=True):
                [call] = assistant["tool_calls"]
                assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"]
                data = json.loads(answer["content"])
                assert data["notice"] == DATA_NOTICE and data["status"] == "ok" and "content" in data
    assert [json.loads(b["messages"][1]["content"])["role"] for b in research.bodies] == ["researcher"] * 4
    goal = json.loads(writer.bodies[0]["messages"][1]["content"])
    assert list(goal) == [
        "role",
        "role_name",
        "saga_id",
        "brief",
        "evidence_digest",
        "round",
        "notes",
        "findings",
        "note",
        "review_digest",
    ]
    assert (goal["role"], goal["evidence_digest"], goal["round"], goal["findings"]) == (
        "writer",
        evidence_digest,
        0,
        [],
    )
    assert goal["notes"] == research.chat.arguments()["notes"]


def test_the_reviewers_judgments_reach_review_record(saga: Saga) -> None:
    _, version = written(saga)
    reviewer = take_turn(saga, "faithful", "check", chat=Contrary, version=version)
    assert reviewer.planner.result is not None and reviewer.planner.result["verdict"] == "changes_requested"
    [review] = artifacts(saga, "review")
    [finding] = [f for f in review.body["findings"] if f["rule"] == "reviewer-contradicted"]
    assert finding["location"] == "paragraph 1 sentence 1" and finding["message"] == "The source says 1958."


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("hallucinate", r"citation \[\d+\]: the quote is not in [\w.-]+ at [0-9a-f]{6}…"),
        (
            "hallucinate-source",
            r"citation \[\d+\]: archive/unpublished-memoir\.md is not one of the evidence's sources",
        ),
    ],
)
def test_an_invented_citation_is_refused_back_to_the_model_and_the_writer_fails_honestly(
    saga: Saga, script: str, reason: str
) -> None:
    evidence_digest = researched(saga)
    writer = take_turn(saga, script, "draft", evidence_digest=evidence_digest)
    assert [r.status for r in writer.outcome.results] == [ToolStatus.ERROR] * 3
    assert len(writer.bodies) == 3  # refused three times: the turn stops without asking again
    assert writer.planner.result is None and writer.planner.failure is not None
    assert writer.planner.failure.startswith("draft.write refused 3 times; the last: ")
    last = writer.planner.failure.removeprefix("draft.write refused 3 times; the last: ")
    assert re.fullmatch(reason, last)
    for body in writer.bodies[1:]:  # the reason went back to the model as the tool's answer
        answer = tool_messages(body)[-1]
        assert answer["status"] == "error" and answer["content"] == last
    assert artifacts(saga, "draft") == []  # nothing stored as a draft


def test_a_model_following_injected_instructions_runs_nothing_outside_its_role(saga: Saga) -> None:
    evidence_digest = researched(saga)
    with Session(saga.app.engine) as s:
        before = s.get(SagaRow, saga.id)
        destinations = list(before.destinations) if before else []
    turns: list[tuple[str, dict[str, Any]]] = [
        ("research", {}),
        ("draft", {"evidence_digest": evidence_digest}),
    ]
    for role_name, work in turns:
        turn = take_turn(saga, "inject", role_name, **work)
        assert turn.outcome.stop_reason.startswith("stopped after 3 rejected proposals")
        statuses = [(r.tool, r.status) for r in turn.outcome.results]
        assert ("publish", ToolStatus.REJECTED) == statuses[0]
        assert all(status is not ToolStatus.OK for _, status in statuses)
        rejected = [r.reason or "" for r in turn.outcome.results if r.status is ToolStatus.REJECTED]
        assert any("destinations: Extra inputs are not permitted" in reason for reason in rejected)
    with Session(saga.app.engine) as s:
        after = s.get(SagaRow, saga.id)
        assert after is not None and list(after.destinations) == destinations
        assert EVIL_DESTINATION not in json.dumps(after.destinations)
        assert s.exec(select(LedgerRow).where(LedgerRow.tool == "publish")).first() is None
        calls = s.exec(
            select(EventRow).where(EventRow.saga_id == saga.id, EventRow.kind == "tool_call")
        ).all()
    seen = {(e.tool, e.status) for e in calls if e.actor in ("research", "draft")}
    assert ("publish", "rejected") in seen and not any(t == "publish" and st == "ok" for t, st in seen)
    escaped = [e for e in calls if e.tool == "corpus.read" and ESCAPING_SOURCE in json.dumps(e.detail)]
    assert all(e.status != "ok" for e in escaped)
    assert artifacts(saga, "draft") == []


def test_malformed_arguments_are_rejected_and_the_loop_stops(saga: Saga) -> None:
    writer = take_turn(saga, "malformed", "draft", evidence_digest=researched(saga))
    assert writer.outcome.stop_reason.startswith(
        "stopped after 3 rejected proposals: arguments: not valid JSON"
    )
    assert len(writer.bodies) == 3 and artifacts(saga, "draft") == []


def test_an_endless_model_is_stopped_by_the_loops_step_bound(saga: Saga) -> None:
    research = take_turn(saga, "endless", "research")
    assert research.outcome.stop_reason == f"step limit of {LIMITS.max_steps} reached"
    assert len(research.bodies) == LIMITS.max_steps and research.planner.evidence is None
    sizes = [len(json.dumps(b["messages"])) for b in research.bodies]
    assert max(sizes) < 80_000  # the conversation stays bounded however long the turn


def test_a_huge_answer_ends_the_turn_with_a_bounded_reason(saga: Saga) -> None:
    writer = take_turn(saga, "huge", "draft", evidence_digest=researched(saga))
    assert len(writer.bodies) == 1 and writer.outcome.results == []
    assert writer.planner.failure is not None and len(writer.planner.failure) < 300
    assert writer.planner.failure.startswith(
        "the model answered without calling draft.write: 'This answer goes on"
    )


def test_pressroom_model_still_drives_the_writer_of_the_default_pipeline(
    sqlite_url: str, corpus: Path
) -> None:
    with ScriptedModel(script="faithful", latency=0.0) as model:
        settings = Settings(
            database_url=sqlite_url, broker_url="inline://", secret="s", model="m", model_base_url=model.url
        )
        app = build_app(settings, memory_destinations=True)
        out = app.submissions.submit(
            brief=BRIEF, corpus=str(corpus), destinations=["memory:env-model"], actor="sam"
        )
        roles = [json.loads(b["messages"][1]["content"])["role"] for b in model.requests]
    try:
        assert roles == ["writer"]  # research and review stay deterministic
        with Session(app.engine) as s:
            head = records.head(s, records.load_saga(s, out["saga_id"]))
            assert head is not None and head.author == "writer" and "From " in head.markdown
    finally:
        app.close()
    shipped = parse_pipeline(
        "default",
        (Path(__file__).parents[2] / "roles/pipelines/default.toml").read_text(),
        source="default.toml",
        kinds=kind_infos(),
    )
    changed = with_settings_model(shipped, settings)
    assert [r.planner for r in changed.roles] == ["deterministic", "settings", "deterministic"]
    assert changed.models["settings"].model == "m" and changed.models["settings"].base_url == model.url
    assert with_settings_model(shipped, Settings(secret="s")) is shipped


def test_a_turn_run_again_is_answered_from_the_recorded_model_calls(saga: Saga) -> None:
    """The requests a planner sends are the same for the same transcript, so the `DurableChat`
    the role handler wraps around the client answers a second run of the turn from its record."""
    with ScriptedModel(script="faithful", latency=0.0) as model:
        house = pipeline(model.url)
        role = house.role("research")
        digests = []
        for run in (1, 2):
            chat = durable_chat(
                saga.app.engine,
                saga_id=saga.id,
                role=role.name,
                round=0,
                request_id=None,
                profile_name="house",
                profile=house.models["house"],
            )
            planner = model_planner_for(
                role.kind,
                role,
                house,
                chat,
                registry=saga.app.registry,
                engine=saga.app.engine,
                saga_id=saga.id,
            )
            caller = Caller(actor=role.name, capabilities=kinds()[role.kind].capabilities, saga_id=saga.id)
            outcome = run_loop(saga.app.harness, planner, caller, LIMITS, sleep=lambda _: None)
            assert outcome.finished and planner.result is not None
            digests.append(planner.result["evidence_digest"])
            assert (chat.requests, chat.replayed) == ((4, 0) if run == 1 else (0, 4))
        assert model.stats().requests == 4 and digests[0] == digests[1]
        assert outcome.results[-1].status is ToolStatus.REPLAYED

"""Declared pipelines drive preparation: rounds of role runs, decided by `sagas.preparation`.

In-process through the services (inline broker), on SQLite and PostgreSQL:
the default pipeline's rounds (submit, reject, edit, retry), a pipeline with
a role kind defined here (a `factcheck` reviewer whose turn fails a version
that says a given word) beside the built-in reviewer, a message of an earlier
round changing nothing, and a handoff asking more than its kind may have.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import DuplicateTaskNameWarning
from sqlmodel import Session, col, delete, select

from orchestrator.celery_app import make_celery
from orchestrator.core.routing import DRAFT, REVIEW
from orchestrator.harness.handles import Grant, Task
from orchestrator.harness.provenance import DataEnvelope
from orchestrator.harness.spec import ToolCall
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import RoleRunRow, SagaRow, WorkRow
from outbox.handlers import Finalizer, noop
from outbox.messages import Envelope, Handoff
from roles import kinds as kind_registry
from roles.artifacts import Finding, ReviewReport
from roles.kinds import RoleKind, register
from roles.rounds import Outcome, finish_run
from roles.tools import store_artifact
from roles.turn import TurnContext, Turned, run_planner
from sagas import records
from tests.integration.helpers import make_app

BRIEF = "history of the library network"
FACTCHECK_TASK = "pressroom.reviewer.factcheck"
FACTCHECKED = """
description = "a draft checked by the built-in reviewer and a factcheck, in parallel"

[[role]]
name = "research"
kind = "researcher"

[[role]]
name = "draft"
kind = "writer"
after = ["research"]

[[role]]
name = "sources"
kind = "reviewer"
after = ["draft"]

[[role]]
name = "facts"
kind = "factcheck"
after = ["draft"]
"""


class ReadOnce:
    """Reads one cited source through the tool path (the kind's only capability), then stops."""

    def __init__(self, saga_id: str, source: str) -> None:
        self.arguments = {"saga_id": saga_id, "source": source}

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None:
        if transcript:
            return None
        return ToolCall(tool="corpus.read", arguments=self.arguments, call_id=uuid.uuid4().hex)


def factcheck_kind(word: str, rule: str) -> RoleKind:
    """A reviewer kind whose turn requests changes for every citation whose quote says `word`."""

    def turn(ctx: TurnContext) -> Turned:
        with Session(ctx.ports.engine) as s:
            version = records.version(s, ctx.saga_id, ctx.handoff.version or 0)
        loop = run_planner(ctx, ReadOnce(ctx.saga_id, version.citations[0]["source"]))
        if failed := loop.failed("factcheck"):
            return failed
        findings = tuple(
            Finding(rule=rule, location=f"citation {c['marker']}", message=f"the quote says {word!r}")
            for c in version.citations
            if word in c["quote"]
        )
        report = ReviewReport(
            verdict="changes_requested" if findings else "pass",
            findings=findings,
            checked_citations=len(version.citations),
            version_digest=version.digest,
        )

        def write(s: Session, saga: SagaRow) -> Outcome:
            digest = store_artifact(s, saga.id, "review", report)
            return Outcome.done(digest, "fail" if findings else "pass")

        return loop.then(write)

    return RoleKind("factcheck", "reviewer", FACTCHECK_TASK, "verdict", frozenset({"corpus.read"}), turn)


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Kinds this test registers are gone after it (the registry is the process's)."""
    monkeypatch.setattr(kind_registry, "_KINDS", dict(kind_registry.kinds()))
    yield


def app_with(db: str, tmp_path: Path, **settings: Any) -> Pressroom:
    folder = tmp_path / "pipelines"
    folder.mkdir(exist_ok=True)
    (folder / "factchecked.toml").write_text(FACTCHECKED, encoding="utf-8")
    return make_app(db, tmp_path, pipelines_dir=folder, **settings)


def runs(app: Pressroom, saga_id: str) -> dict[int, dict[str, tuple[str, str | None]]]:
    """round -> role -> (state, verdict)."""
    out: dict[int, dict[str, tuple[str, str | None]]] = {}
    with Session(app.engine) as s:
        rows = s.exec(select(RoleRunRow).where(RoleRunRow.saga_id == saga_id)).all()
    for row in rows:
        out.setdefault(row.round, {})[row.role] = (row.state, row.verdict)
    return out


def submit(app: Pressroom, corpus: Path, pipeline: str | None = None) -> dict[str, Any]:
    return app.submissions.submit(
        brief=BRIEF, corpus=str(corpus), destinations=["memory:r"], actor="dana", pipeline=pipeline
    )


def test_the_default_pipeline_prepares_in_rounds(either_db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(either_db_url, tmp_path)
    ready = submit(app, corpus)
    sid = ready["saga_id"]
    assert ready["state"] == "ready-for-review" and ready["version"] == 1
    first = {"researcher": ("done", None), "writer": ("done", None), "reviewer": ("done", "pass")}
    assert runs(app, sid) == {1: first}
    review = app.reads.show(sid)["review"]
    assert review["verdict"] == "pass" and review["reviewers"]["reviewer"]["verdict"] == "pass"

    # A rejection: the writers and every role after them, not the research.
    again = app.reviews.reject(sid, actor="rita", reason="citation [2] is off the brief")
    assert again["state"] == "ready-for-review" and again["version"] == 2
    assert runs(app, sid)[2] == {"writer": ("done", None), "reviewer": ("done", "pass")}

    # An edit: the reviewers alone read the person's text; its failed review is reported, never rewritten.
    text = app.reads.show(sid)["markdown"]
    edited = tmp_path / "edited.md"
    edited.write_text(
        text.replace("four fixed locations and one bookmobile.", "cats in every window."), "utf-8"
    )
    reported = app.reviews.edit(sid, path=str(edited), actor="gina")
    assert reported["state"] == "ready-for-review" and reported["version"] == 3
    assert reported["reason"].startswith("the automated review of gina's version 3 requests changes (")
    assert runs(app, sid)[3] == {"reviewer": ("done", "fail")}
    with Session(app.engine) as s:
        assert s.get_one(SagaRow, sid).prep_round == 3


def test_a_kind_defined_here_reviews_beside_the_builtin_reviewer(
    either_db_url: str, tmp_path: Path, corpus: Path, own_registry: None
) -> None:
    register(factcheck_kind("dragon", "factcheck-word"))
    app = app_with(either_db_url, tmp_path)
    assert FACTCHECK_TASK in app.handlers, "every registered kind's task has the role handler"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DuplicateTaskNameWarning)  # a second Celery app in one process
        assert FACTCHECK_TASK in make_celery("memory://").tasks, "and a Celery task, routed to its queue"
    ready = submit(app, corpus, "factchecked")
    assert ready["state"] == "ready-for-review", ready
    assert runs(app, ready["saga_id"]) == {
        1: {
            "research": ("done", None),
            "draft": ("done", None),
            "sources": ("done", "pass"),
            "facts": ("done", "pass"),
        }
    }
    reviewers = app.reads.show(ready["saga_id"])["review"]["reviewers"]
    assert {role: r["verdict"] for role, r in reviewers.items()} == {"sources": "pass", "facts": "pass"}
    read = _tool_events(app, ready["saga_id"], "corpus.read")
    assert any(e["actor"] == "facts" for e in read), "the factcheck's turn went through the tool path"
    fork = app.reviews.fork(ready["saga_id"], version=1, actor="olga")["saga_id"]
    with Session(app.engine) as s:  # a fork rejected later prepares with the original's pipeline
        original, copy = s.get_one(SagaRow, ready["saga_id"]), s.get_one(SagaRow, fork)
        assert (copy.pipeline, copy.pipeline_digest) == ("factchecked", original.pipeline_digest)


def test_one_failing_reviewer_sends_the_draft_back_and_both_verdicts_show(
    either_db_url: str, tmp_path: Path, corpus: Path, own_registry: None
) -> None:
    # The writer drops the quotes a `quote-not-verbatim` finding names: it can act on this one.
    register(factcheck_kind("bookmobile", "quote-not-verbatim"))
    app = app_with(either_db_url, tmp_path)
    done = submit(app, corpus, "factchecked")
    sid = done["saga_id"]
    assert done["state"] == "ready-for-review" and done["version"] == 2, done
    rounds = runs(app, sid)
    assert rounds[1]["sources"] == ("done", "pass") and rounds[1]["facts"] == ("done", "fail")
    assert set(rounds[2]) == {"draft", "sources", "facts"}, "a revision round: the writer and the reviewers"
    assert rounds[2]["facts"] == ("done", "pass") and rounds[2]["sources"] == ("done", "pass")
    with Session(app.engine) as s:
        first = records.version(s, sid, 1)
        assert first.review is not None and first.review["verdict"] == "changes_requested"
        shown = {role: r["verdict"] for role, r in first.review["reviewers"].items()}
        assert shown == {"sources": "pass", "facts": "changes_requested"}
        assert [f["rule"] for f in first.review["findings"]] == ["quote-not-verbatim"]
        assert s.get_one(SagaRow, sid).review_rounds == 1
    assert "bookmobile" not in app.reads.show(sid)["markdown"]


def test_out_of_revision_rounds_fails_with_the_rules(
    either_db_url: str, tmp_path: Path, corpus: Path, own_registry: None
) -> None:
    register(factcheck_kind("bookmobile", "quote-not-verbatim"))
    app = app_with(either_db_url, tmp_path, max_review_rounds=0)
    failed = submit(app, corpus, "factchecked")
    assert failed["state"] == "failed"
    assert failed["reason"] == "review still requests changes after 0 revision rounds: quote-not-verbatim"


def test_a_finding_the_writer_cannot_act_on_returns_the_head_unchanged(
    either_db_url: str, tmp_path: Path, corpus: Path, own_registry: None
) -> None:
    register(factcheck_kind("bookmobile", "factcheck-word"))
    app = app_with(either_db_url, tmp_path)
    back = submit(app, corpus, "factchecked")
    assert back["state"] == "ready-for-review" and back["version"] == 1
    assert "the writer could not act on the review's findings" in back["reason"]
    assert runs(app, back["saga_id"])[2]["draft"] == ("unchanged", None)


def _outbox(app: Pressroom, task: str) -> list[OutboxRow]:
    with Session(app.engine) as s:
        return list(
            s.exec(select(OutboxRow).where(OutboxRow.task == task).order_by(col(OutboxRow.created_at)))
        )


def _tool_events(app: Pressroom, saga_id: str, tool: str) -> list[dict[str, Any]]:
    return [e for e in app.reads.history(saga_id)["events"] if e.get("tool") == tool]


def _deliver(app: Pressroom, row: OutboxRow) -> str:
    return app.consumer.handle(
        Envelope(message_id=row.id, task=row.task, queue=row.queue, payload=row.payload)
    )


def test_an_earlier_rounds_message_changes_nothing_and_a_wider_handoff_fails(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(either_db_url, tmp_path)
    sid = submit(app, corpus)["saga_id"]
    held = make_app(either_db_url, tmp_path, broker_url="none://")
    held.reviews.reject(sid, actor="rita", reason="citation [2] is off the brief")  # round 2, queued only
    with unit_of_work(held.engine) as uow:  # a writer's message of round 1, arriving late
        held.dispatcher.dispatch(
            uow, saga_id=sid, task=DRAFT, round=1, role="writer", capabilities=("draft.write",)
        )
    stale, real = sorted(_outbox(app, DRAFT)[-2:], key=lambda r: r.payload["round"])
    assert (stale.payload["round"], real.payload["round"]) == (1, 2)
    drafts = len(_tool_events(app, sid, "draft.write"))
    assert _deliver(app, stale) == "applied"
    status = app.reads.status(sid)
    assert status["state"] == "preparing" and status["version"] == 1, "the stale message wrote nothing"
    assert runs(app, sid)[2] == {"writer": ("queued", None), "reviewer": ("waiting", None)}
    assert len(_tool_events(app, sid, "draft.write")) == drafts, "nor did it run the writer"
    with unit_of_work(held.engine) as uow:  # the writer's task, naming a role of another kind
        held.dispatcher.dispatch(
            uow, saga_id=sid, task=DRAFT, round=2, role="reviewer", capabilities=("draft.write",)
        )
    assert _deliver(app, _outbox(app, DRAFT)[-1]) == "applied"
    assert len(_tool_events(app, sid, "draft.write")) == drafts and app.reads.status(sid)["version"] == 1
    reviews = len(_tool_events(app, sid, "review.record"))
    with unit_of_work(held.engine) as uow:  # a reviewer's message for a version that is not the head
        held.dispatcher.dispatch(
            uow, saga_id=sid, task=REVIEW, round=2, role="reviewer", version=2, version_digest="0" * 64
        )
    assert _deliver(app, _outbox(app, REVIEW)[-1]) == "applied"
    assert len(_tool_events(app, sid, "review.record")) == reviews

    # A handoff of this round whose (signed) handle grants the writer more than its kind may
    # have: the saga fails.
    wide = frozenset({"draft.write", "publish"})
    with unit_of_work(held.engine) as uow:
        held.dispatcher.dispatch(
            uow,
            saga_id=sid,
            task=DRAFT,
            round=2,
            role="writer",
            grant=Grant("writer", wide, Task(wide, corpus=str(corpus))),
        )
    assert _deliver(app, _outbox(app, DRAFT)[-1]) == "applied"
    failed = app.reads.status(sid)
    assert failed["state"] == "failed" and failed["reason"].startswith("refused handoff: ")
    assert "publish" in failed["reason"] and runs(app, sid)[2]["writer"][0] == "failed"
    assert _deliver(app, real) == "applied" and app.reads.status(sid)["version"] == 1

    # A retry prepares again: a round of every role.
    # The same evidence gives the head's text again: no identical version, the reviewer reads the head.
    retried = app.reviews.retry(sid, actor="olga")
    assert retried["state"] == "ready-for-review" and retried["version"] == 1, retried
    assert runs(app, sid)[3] == {
        "researcher": ("done", None),
        "writer": ("done", None),
        "reviewer": ("done", "pass"),
    }


MODELLED = """
[[role]]
name = "researcher"
kind = "researcher"

[[role]]
name = "writer"
kind = "writer"
after = ["researcher"]
planner = "house"

[[role]]
name = "reviewer"
kind = "reviewer"
after = ["writer"]

[model.house]
base_url = "http://127.0.0.1:9/v1"
model = "some-model"
"""


def test_a_role_that_calls_a_model_never_takes_its_lease_in_its_final_transaction(
    pg_url: str, tmp_path: Path, corpus: Path
) -> None:
    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "modelled.toml").write_text(MODELLED, encoding="utf-8")
    held = make_app(pg_url, tmp_path, broker_url="none://", pipelines_dir=folder)
    app = make_app(pg_url, tmp_path, pipelines_dir=folder)
    sid = submit(held, corpus, "modelled")["saga_id"]
    (research,) = _outbox(app, "pressroom.researcher.research")
    assert _deliver(app, research) == "applied"  # the research's finish starts the writer
    (draft,) = _outbox(app, DRAFT)
    handoff = Handoff.model_validate(draft.payload)
    assert (handoff.role, handoff.round, handoff.uses_model) == ("writer", 1, True)
    assert not app.consumer.folds_lease(draft.queue, handoff), (
        "a model call never runs under the work row's lock"
    )
    assert app.consumer.folds_lease(draft.queue, handoff.model_copy(update={"uses_model": False}))
    assert runs(app, sid)[1]["writer"] == ("queued", None)
    seen: list[str | None] = []

    def turn_in_progress(given: Handoff, holder: str) -> Finalizer:
        with Session(app.engine) as s:  # another connection: only committed rows are seen
            seen.append(s.get_one(WorkRow, given.work_id).holder)
        return noop

    app.handlers[DRAFT] = turn_in_progress
    assert _deliver(app, draft) == "applied"
    assert seen == [draft.id], "the lease was committed before the turn began"


def test_a_run_already_finished_is_not_finished_again(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(either_db_url, tmp_path)
    sid = submit(app, corpus)["saga_id"]
    with unit_of_work(app.engine) as uow:
        saga = records.load_saga(uow.session, sid, lock=True)
        late = Outcome.failed("a late copy")
        assert finish_run(uow, app.dispatcher.dispatch, saga, "writer", late, max_revisions=2) is None
        assert finish_run(uow, app.dispatcher.dispatch, saga, "nobody", late, max_revisions=2) is None
    assert app.reads.status(sid)["state"] == "ready-for-review"
    assert runs(app, sid)[1]["writer"] == ("done", None)


def test_a_turn_whose_round_ended_meanwhile_writes_nothing(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(either_db_url, tmp_path)
    sid = submit(app, corpus)["saga_id"]
    held = make_app(either_db_url, tmp_path, broker_url="none://")
    held.reviews.reject(sid, actor="rita", reason="citation [2] is off the brief")
    draft = _outbox(app, DRAFT)[-1]
    finalize = app.handlers[DRAFT](Handoff.model_validate(draft.payload), draft.id)  # the writer's turn ran
    with unit_of_work(app.engine) as uow:  # ...while the saga moved to another round
        saga = records.load_saga(uow.session, sid, lock=True)
        saga.prep_round += 1
        uow.session.add(saga)
    with unit_of_work(app.engine) as uow:
        finalize(uow)
    assert app.reads.status(sid)["version"] == 1
    assert runs(app, sid)[2]["writer"] == ("queued", None)


def test_a_saga_preparing_from_before_the_rounds_is_prepared_again(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    """A saga mid-preparation at the upgrade: round 0, no runs, a writer's message of the old shape
    (no role). The message starts a round of every role instead of finishing a run no round holds."""
    held = make_app(either_db_url, tmp_path, broker_url="none://")
    sid = submit(held, corpus)["saga_id"]
    with unit_of_work(held.engine) as uow:  # as the release before pipelines left it
        uow.session.exec(delete(RoleRunRow).where(col(RoleRunRow.saga_id) == sid))  # type: ignore[call-overload]
        saga = uow.session.get_one(SagaRow, sid)
        saga.prep_round = 0
        uow.session.add(saga)
        held.dispatcher.dispatch(uow, saga_id=sid, task=DRAFT, capabilities=("draft.write",))
    app = make_app(either_db_url, tmp_path)
    old = _outbox(app, DRAFT)[-1]
    assert "role" not in old.payload or old.payload["role"] is None
    assert _deliver(app, old) == "applied"
    app.consumer.drain()  # the new round's messages, delivered in this process
    ready = app.reads.status(sid)
    assert ready["state"] == "ready-for-review" and ready["version"] == 1, ready
    assert runs(app, sid) == {
        1: {"researcher": ("done", None), "writer": ("done", None), "reviewer": ("done", "pass")}
    }

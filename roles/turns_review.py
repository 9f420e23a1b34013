"""The reviewer's turn: check the head version against the original sources, record a report.

Its run's result is the `review` artifact and its verdict (`pass`, or `fail`
for a report that requests changes). The version row's `review` is the merge
of the round's reports (`roles.reviews`), written when the run finishes.
"""

from __future__ import annotations

from typing import Literal

from sqlmodel import Session

from orchestrator.store.tables import SagaRow
from roles.artifacts import Citation
from roles.planners import ReviewPlanner
from roles.reviewing import cited_sentences
from roles.rounds import Outcome
from roles.turn import TurnContext, Turned, model_planner, run_planner
from sagas import records


def review_turn(ctx: TurnContext) -> Turned:
    with Session(ctx.ports.engine) as s:
        saga = records.load_saga(s, ctx.saga_id)
        version = records.version(s, saga.id, ctx.handoff.version or saga.head_version)
        sources = sorted({c["source"] for c in version.citations if "source" in c})
        number, digest = version.number, version.digest
        sentences = cited_sentences(version.markdown, [Citation.model_validate(c) for c in version.citations])
    planner = model_planner(ctx, version=number) or ReviewPlanner(
        ctx.saga_id, number, digest, sources, sentences=sentences
    )
    loop = run_planner(ctx, planner)
    if planner.result is None:
        return loop.fail("review", "no report")
    if failed := loop.failed("review"):
        return failed
    review_digest = str(planner.result["review_digest"])
    verdict: Literal["pass", "fail"] = "pass" if planner.result["verdict"] == "pass" else "fail"

    def write(_s: Session, _saga: SagaRow) -> Outcome:
        return Outcome.done(review_digest, verdict)

    return loop.then(write)


__all__ = ["review_turn"]

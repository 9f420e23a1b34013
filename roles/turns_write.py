"""The writer's turn: one draft from the evidence (answering a review's findings or a
person's rejection, when the round carries them), then a new head version.

Its run's result is the `draft` artifact. A revision that leaves the head's
text as it was mints no identical version: the run ends `unchanged`, and the
saga goes back to the person with the reason.
"""

from __future__ import annotations

from sqlmodel import Session

from orchestrator.store.tables import SagaRow
from roles.model_turn import ModelPlanner
from roles.planners import WriterPlanner
from roles.rounds import Outcome
from roles.tools import load_artifact, person_author
from roles.turn import TurnContext, Turned, model_planner, run_planner
from sagas import records

# The version author of every writer role: `roles.tools.MACHINE_AUTHORS` tells its text from a person's.
AUTHOR = "writer"


def write_turn(ctx: TurnContext) -> Turned:
    handoff = ctx.handoff
    evidence_digest = ctx.ref("evidence")
    with Session(ctx.ports.engine) as s:
        saga = records.load_saga(s, ctx.saga_id)
        if evidence_digest is None:
            head = records.head(s, saga)
            evidence_digest = head.evidence_digest if head else None
        # The draft's round is the saga's revision count (its key: a revision is a new draft).
        revisions = saga.review_rounds
        # A person's words are revised in place by the deterministic writer, never written
        # again by a model from the evidence.
        person = person_author(s, saga.id, upto=saga.head_version)
    if evidence_digest is None:
        return Turned.failed("no evidence to write from")
    planner: WriterPlanner | ModelPlanner = WriterPlanner(
        ctx.saga_id, evidence_digest, revisions, ctx.ref("review"), handoff.note
    )
    if person is None:
        planner = (
            model_planner(
                ctx,
                evidence_digest=evidence_digest,
                round=revisions,
                review_digest=ctx.ref("review"),
                note=handoff.note,
            )
            or planner
        )
    loop = run_planner(ctx, planner)
    if planner.result is None:
        return loop.fail("writing", getattr(planner, "failure", None) or "no draft")
    if failed := loop.failed("writing"):
        return failed
    draft_digest = str(planner.result["draft_digest"])
    asked = handoff.note is not None or ctx.ref("review") is not None
    what = "the rejection" if handoff.note else "the review's findings"

    def write(s: Session, saga: SagaRow) -> Outcome:
        body = load_artifact(s, draft_digest)
        head = records.head(s, saga)
        if head is not None and head.markdown == body["markdown"] and head.review:
            if not asked:
                # Written again from the same evidence (a retry): the head is this text already.
                return Outcome.done(draft_digest)
            # A note or findings the writer cannot act on: say so; do not mint an identical version.
            how = (
                "its model wrote the same text again"
                if isinstance(planner, ModelPlanner)
                else "the deterministic writer removes the sentences of the citations named, e.g. [2]"
            )
            return Outcome.unchanged(
                f"the writer could not act on {what} ({how}); change the text with `pressroom edit`"
            )
        records.add_version(
            s,
            saga,
            title=body["title"],
            markdown=body["markdown"],
            author=AUTHOR,
            citations=body["citations"],
            evidence_digest=evidence_digest,
        )
        return Outcome.done(draft_digest)

    return loop.then(write)


__all__ = ["AUTHOR", "write_turn"]

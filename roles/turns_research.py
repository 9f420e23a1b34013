"""The researcher's turn: search the saga's corpus, read the best sources, record the evidence.

Its run's result is the `evidence` artifact, which the writers after it read.
"""

from __future__ import annotations

from sqlmodel import Session

from orchestrator.store.tables import SagaRow
from roles.artifacts import Evidence
from roles.planners import ResearchPlanner
from roles.rounds import Outcome
from roles.tools import store_artifact
from roles.turn import TurnContext, Turned, model_planner, run_planner


def research_turn(ctx: TurnContext) -> Turned:
    planner = model_planner(ctx) or ResearchPlanner(ctx.saga_id, round=ctx.handoff.round)
    loop = run_planner(ctx, planner)
    if planner.evidence is None:
        return loop.fail("research", "no evidence")
    if failed := loop.failed("research"):
        return failed
    evidence = Evidence.model_validate(planner.evidence)
    if not evidence.passages:
        return Turned.failed(_why_none(evidence), loop.stop_event)

    def write(s: Session, saga: SagaRow) -> Outcome:
        return Outcome.done(store_artifact(s, saga.id, "evidence", evidence))

    return loop.then(write)


def _why_none(evidence: Evidence) -> str:
    """Why research found nothing to write from."""
    if evidence.files_read > 0:
        return "no passage in the corpus matches the brief"
    why = "the corpus has no readable .md or .txt file"
    if evidence.skipped:
        why += " (skipped: " + "; ".join(f"{s.path}: {s.reason}" for s in evidence.skipped[:5]) + ")"
    return why


__all__ = ["research_turn"]

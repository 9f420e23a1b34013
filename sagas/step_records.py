"""Changes to publishing steps: every change of a step's state writes its event.

The `step` event (status: the new state; detail: destination, key, version
digest) commits with the step row in the caller's unit of work, so the saga
reducer (`sagas.reducer`) can rebuild every step from the events alone.
"""

from __future__ import annotations

from sqlmodel import Session

from orchestrator.store.events import add_event
from orchestrator.store.tables import StepRow, utcnow
from sagas.step_states import StepState

STEP_EVENT = "step"


def set_step(session: Session, step: StepRow, state: StepState, *, actor: str) -> None:
    """Move `step` to `state` and record it (its key and receipt are the caller's to set first)."""
    step.state = state.value
    step.updated_at = utcnow()
    session.add(step)
    add_event(
        session,
        saga_id=step.saga_id,
        actor=actor,
        kind=STEP_EVENT,
        status=state.value,
        detail={
            "destination": step.uri,
            "position": step.position,
            "key": step.idempotency_key,
            "version_digest": step.version_digest,
        },
    )


__all__ = ["STEP_EVENT", "set_step"]

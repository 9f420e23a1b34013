"""The lease sweeper's last word on work that kept losing its lease (`sagas.decider` decides)."""

from __future__ import annotations

from orchestrator.harness.ports import Ledger
from orchestrator.store.db import UnitOfWork
from orchestrator.store.tables import WorkRow
from sagas import decider, records
from sagas.machine import SagaEvent, SagaState
from sagas.step_records import set_step
from sagas.step_states import StepState

SWEEPER = "sweeper"


def give_up(uow: UnitOfWork, work: WorkRow, attempts: int, store: Ledger) -> None:
    """Fail the preparation, or leave the execution to a person, with the reason."""
    s = uow.session
    saga = records.load_saga(s, work.saga_id, lock=True)
    reason = f"{work.task} lost its lease {attempts} times; gave up"
    for event in decider.on_lease_exhausted(SagaState(saga.state)):
        records.transition(
            s, saga, event, actor=SWEEPER, reason=None if event is SagaEvent.EXECUTION_STARTED else reason
        )
        if event is SagaEvent.STEP_UNCERTAIN:
            # A publish may have started: a step whose intent was recorded with no result
            # is uncertain; what happened is unknown until a person looks.
            for step in records.steps(s, saga.id):
                key = step.idempotency_key
                if step.state != StepState.DONE and key and store.mark_uncertain(key, within=uow):
                    set_step(s, step, StepState.UNCERTAIN, actor=SWEEPER)


__all__ = ["give_up"]

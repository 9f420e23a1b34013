"""The rules a takedown rests on (`sagas.reconcile.takedown`), without services."""

from __future__ import annotations

from sagas.effect_checks import COMPENSABLE
from sagas.machine import SagaState, allowed
from sagas.reconcile import TAKEN_DOWN_FROM
from sagas.step_states import StepState


def test_a_succeeded_saga_has_no_way_out_so_a_takedown_leaves_it_succeeded() -> None:
    # No event moves a succeeded saga (not to cancelled, not to effect-unknown): a takedown
    # records its outcome on the step, and the saga's state stays what the audit derives.
    assert allowed(SagaState.SUCCEEDED) == frozenset()


def test_a_takedown_undoes_a_published_page_or_one_whose_takedown_failed() -> None:
    assert TAKEN_DOWN_FROM == {StepState.DONE, StepState.COMPENSATION_FAILED}
    # The tool's own binding check agrees with the use case: nothing else of a succeeded saga is undone.
    assert {StepState(s) for s in COMPENSABLE[SagaState.SUCCEEDED]} == TAKEN_DOWN_FROM

"""The saga state machine: states, events, the transition table, `apply()`.

Pure: no database, broker, clock or randomness. States are spelled exactly as
in DESIGN.md.
"""

from __future__ import annotations

from enum import StrEnum

from orchestrator.core.errors import IllegalTransition


class SagaState(StrEnum):
    PREPARING = "preparing"
    READY_FOR_REVIEW = "ready-for-review"
    APPROVED = "approved"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EFFECT_UNKNOWN = "effect-unknown"
    CANCELLED = "cancelled"


class SagaEvent(StrEnum):
    REVIEW_PASSED = "review_passed"
    REVISION_UNCHANGED = "revision_unchanged"
    REVIEW_REPORTED = "review_reported"
    PREPARATION_FAILED = "preparation_failed"
    REJECTED = "rejected"
    EDITED = "edited"
    APPROVED = "approved"
    APPROVAL_LAPSED = "approval_lapsed"
    EXECUTION_STARTED = "execution_started"
    ALL_ACKED = "all_acked"
    STEP_FAILED = "step_failed"
    STEP_UNCERTAIN = "step_uncertain"
    RECONCILED = "reconciled"
    CANCELLED = "cancelled"
    COMPENSATION_FAILED = "compensation_failed"
    RETRIED = "retried"
    PREPARATION_RETRIED = "preparation_retried"
    FORKED = "forked"


S, E = SagaState, SagaEvent

TRANSITIONS: dict[tuple[SagaState, SagaEvent], SagaState] = {
    (S.PREPARING, E.REVIEW_PASSED): S.READY_FOR_REVIEW,
    # The writer could not act on a person's rejection: back to the person, no new version.
    (S.PREPARING, E.REVISION_UNCHANGED): S.READY_FOR_REVIEW,
    # A person's version the reviewer finds fault with: shown to the approver, never redrafted.
    (S.PREPARING, E.REVIEW_REPORTED): S.READY_FOR_REVIEW,
    (S.PREPARING, E.PREPARATION_FAILED): S.FAILED,
    (S.PREPARING, E.CANCELLED): S.CANCELLED,
    (S.READY_FOR_REVIEW, E.REJECTED): S.PREPARING,
    (S.READY_FOR_REVIEW, E.EDITED): S.PREPARING,
    (S.READY_FOR_REVIEW, E.APPROVED): S.APPROVED,
    (S.READY_FOR_REVIEW, E.CANCELLED): S.CANCELLED,
    (S.APPROVED, E.EDITED): S.PREPARING,
    (S.APPROVED, E.REJECTED): S.PREPARING,
    (S.APPROVED, E.EXECUTION_STARTED): S.EXECUTING,
    # The approval expired (or was voided) before execution began: ask again.
    (S.APPROVED, E.APPROVAL_LAPSED): S.READY_FOR_REVIEW,
    (S.APPROVED, E.CANCELLED): S.CANCELLED,
    # At a step's intent the approver was no longer an active reviewer: nothing was sent
    # (earlier steps are compensated); a reviewer must approve again.
    (S.EXECUTING, E.APPROVAL_LAPSED): S.READY_FOR_REVIEW,
    (S.EXECUTING, E.ALL_ACKED): S.SUCCEEDED,
    (S.EXECUTING, E.STEP_FAILED): S.FAILED,
    (S.EXECUTING, E.STEP_UNCERTAIN): S.EFFECT_UNKNOWN,
    # An operator's cancel while executing: the runner stops before the next step,
    # undoes what was published, then cancels.
    (S.EXECUTING, E.CANCELLED): S.CANCELLED,
    # An undo failed after its retries (or may have happened): a person decides.
    (S.EXECUTING, E.COMPENSATION_FAILED): S.EFFECT_UNKNOWN,
    (S.EFFECT_UNKNOWN, E.RECONCILED): S.EXECUTING,
    (S.EFFECT_UNKNOWN, E.CANCELLED): S.CANCELLED,
    # An operator's retry of a failed execution, same keys. (A retried undo that works
    # settles its step: the saga leaves effect-unknown by `reconciled`, as DESIGN says.)
    (S.FAILED, E.RETRIED): S.EXECUTING,
    # A saga that failed before it was approved prepares again.
    (S.FAILED, E.PREPARATION_RETRIED): S.PREPARING,
    # A fork starts at ready-for-review with the forked version's bytes.
    (S.PREPARING, E.FORKED): S.READY_FOR_REVIEW,
}

# How a refusal names the move: "cannot cancel a saga that is succeeded".
VERBS: dict[SagaEvent, str] = {
    E.REVIEW_PASSED: "pass the review of",
    E.REVISION_UNCHANGED: "return an unchanged revision of",
    E.REVIEW_REPORTED: "report the review of",
    E.PREPARATION_FAILED: "fail the preparation of",
    E.REJECTED: "reject",
    E.EDITED: "edit",
    E.APPROVED: "approve",
    E.APPROVAL_LAPSED: "lapse the approval of",
    E.EXECUTION_STARTED: "start executing",
    E.ALL_ACKED: "finish",
    E.STEP_FAILED: "fail a step of",
    E.STEP_UNCERTAIN: "mark a step uncertain in",
    E.RECONCILED: "reconcile",
    E.CANCELLED: "cancel",
    E.COMPENSATION_FAILED: "mark a compensation failed in",
    E.RETRIED: "retry",
    E.PREPARATION_RETRIED: "retry",
    E.FORKED: "fork into",
}

TERMINAL: frozenset[SagaState] = frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED})


def allowed(state: SagaState) -> frozenset[SagaEvent]:
    """Events that may be applied in `state`."""
    return frozenset(event for (src, event) in TRANSITIONS if src == state)


def apply(state: SagaState | str, event: SagaEvent | str) -> SagaState:
    """The next state, or `IllegalTransition` naming both."""
    try:
        src, ev = SagaState(state), SagaEvent(event)
    except ValueError as exc:
        raise IllegalTransition(
            f"unknown state or event: {exc}", state=str(state), event=str(event)
        ) from None
    nxt = TRANSITIONS.get((src, ev))
    if nxt is None:
        raise IllegalTransition(
            f"cannot {VERBS.get(ev, ev.value.replace('_', ' '))} a saga that is {src.value}",
            state=src.value,
            event=ev.value,
        )
    return nxt


__all__ = ["TERMINAL", "TRANSITIONS", "SagaEvent", "SagaState", "allowed", "apply"]

"""The states of one publishing step (one destination of an execution). No I/O.

`pending` (to run), `done` (acked, receipt recorded), `uncertain` (maybe
applied: waits for a person), `failed` (definitely not applied),
`compensated` (undone after a later failure or a cancel), `compensation-failed`
(the undo failed after its retries, or may have happened: a person decides),
`kept` (a person confirmed that an effect whose undo failed stays). `executing` is
spelled for stored rows of older versions; nothing sets it today.
"""

from __future__ import annotations

from enum import StrEnum


class StepState(StrEnum):
    PENDING = "pending"
    EXECUTING = "executing"
    DONE = "done"
    UNCERTAIN = "uncertain"
    FAILED = "failed"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation-failed"
    KEPT = "kept"


__all__ = ["StepState"]

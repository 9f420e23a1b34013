"""The states of one publishing step (one destination of an execution). No I/O.

`pending` (to run), `done` (acked, receipt recorded), `uncertain` (maybe
applied: waits for a person), `failed` (definitely not applied),
`compensated` (undone after a later failure or a cancel). `executing` is
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


__all__ = ["StepState"]

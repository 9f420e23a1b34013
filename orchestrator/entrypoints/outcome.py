"""Exit codes that tell the truth about work a command drove inline.

With the in-process broker a command (`submit`, `approve`, `edit`, `cancel`,
`reconcile`, …) runs the work it queued before it returns. When that work
ended `failed` or `effect-unknown`, the command prints its output as usual and
then exits 4 with the final state in its one-line error. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from orchestrator.core.errors import Refused

BAD_ENDS: Final = frozenset({"failed", "effect-unknown"})


class WorkEnded(Refused):
    """The command was carried out, but the work it drove ended badly (exit 4)."""


def check(payload: Mapping[str, Any]) -> None:
    """Raise `WorkEnded` when the saga in `payload` is `failed` or `effect-unknown`."""
    state = payload.get("state")
    if state not in BAD_ENDS:
        return
    reason = payload.get("reason")
    raise WorkEnded(
        f"saga {payload.get('saga_id')} is {state}" + (f": {reason}" if reason else ""),
        saga_id=payload.get("saga_id"),
        state=state,
    )


__all__ = ["BAD_ENDS", "WorkEnded", "check"]

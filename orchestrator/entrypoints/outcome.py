"""Exit codes that tell the truth about work a command drove inline.

With the in-process broker a command (`submit`, `approve`, `reject`, `edit`,
`cancel`, `reconcile`, `retry`) runs the work it queued before it returns;
with a real broker a worker may have finished it by the time the command
reads the saga back. When that work ended `failed` or `effect-unknown`, the
command prints its output as usual (with `--json`, the one object) and then
exits 6 (`EXIT_WORK_ENDED`), not 4: the command itself was carried out (an
approval was made and used), only the work it started ended badly. Its one
line says so: `approve` says `approved; the publish it started ended STATE:
reason`, the others `saga ID is STATE: reason`. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from orchestrator.core.errors import EXIT_WORK_ENDED, PressroomError

BAD_ENDS: Final = frozenset({"failed", "effect-unknown"})


class WorkEnded(PressroomError):
    """The command was carried out, but the work it drove ended badly (exit 6)."""

    exit_code = EXIT_WORK_ENDED


def check(payload: Mapping[str, Any], *, approved: bool = False) -> None:
    """Raise `WorkEnded` when the saga in `payload` is `failed` or `effect-unknown`;
    `approved`: the payload is an approval's (the line says the approval was made)."""
    state = payload.get("state")
    if state not in BAD_ENDS:
        return
    reason = payload.get("reason")
    ended = f"{state}" + (f": {reason}" if reason else "")
    saga_id = payload.get("saga_id")
    message = f"approved; the publish it started ended {ended}" if approved else f"saga {saga_id} is {ended}"
    raise WorkEnded(message, saga_id=saga_id, state=state)


__all__ = ["BAD_ENDS", "WorkEnded", "check"]

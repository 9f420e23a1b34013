"""Read use cases: a saga's status (or a page of sagas), a version, a diff, the history."""

from __future__ import annotations

import difflib
from datetime import timedelta
from typing import Any

from orchestrator import paging, views
from orchestrator.core.clock import Clock
from orchestrator.core.errors import InvalidInput, NotFound
from orchestrator.ports import Sessions
from sagas import records


class Reads:
    """Reads over `sessions`; `review_reminder` (PRESSROOM_REVIEW_REMINDER) says which sagas wait."""

    def __init__(self, sessions: Sessions, clock: Clock, *, review_reminder: float | None) -> None:
        self._sessions = sessions
        self._clock = clock
        self._review_reminder = review_reminder

    def status(
        self,
        saga_id: str | None = None,
        *,
        limit: int | None = None,
        after: str | None = None,
        waiting: bool = False,
    ) -> dict[str, Any]:
        """One saga, or a page of sagas (`paging.list_sagas`); `waiting`: only those in
        ready-for-review longer than PRESSROOM_REVIEW_REMINDER (all of them when unset)."""
        with self._sessions() as s:
            if saga_id is None:
                since = self._clock.now() - timedelta(seconds=self._review_reminder or 0) if waiting else None
                return paging.list_sagas(s, limit=limit, after=after, waiting_since=since)
            if limit is not None or after or waiting:
                raise InvalidInput("--limit, --after and --waiting list sagas; leave out the saga id")
            return views.saga_status(s, records.find_saga(s, saga_id))

    def show(self, saga_id: str, version: int | None = None) -> dict[str, Any]:
        with self._sessions() as s:
            saga = records.find_saga(s, saga_id)
            number = version if version is not None else saga.head_version
            if number == 0:
                raise NotFound(f"saga {saga.id} has no version yet ({saga.state})")
            return views.version_view(s, saga, records.version(s, saga.id, number))

    def diff(self, saga_id: str, a: int, b: int) -> str:
        with self._sessions() as s:
            saga = records.find_saga(s, saga_id)
            va, vb = records.version(s, saga.id, a), records.version(s, saga.id, b)
            lines = difflib.unified_diff(
                va.markdown.splitlines(keepends=True),
                vb.markdown.splitlines(keepends=True),
                fromfile=f"v{a} {va.digest[:12]}",
                tofile=f"v{b} {vb.digest[:12]}",
            )
            return "".join(lines)

    def history(self, saga_id: str) -> dict[str, Any]:
        with self._sessions() as s:
            saga = records.find_saga(s, saga_id)
            return {"saga_id": saga.id, "events": views.events(s, saga.id)}

    def saga_id(self, prefix: str) -> str:
        """The full id of the saga `prefix` names (NotFound when none, InvalidInput when several)."""
        with self._sessions() as s:
            return records.find_saga(s, prefix).id


__all__ = ["Reads"]

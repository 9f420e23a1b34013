"""Read use cases: a saga's status (or a page of sagas), a version, a diff, the history."""

from __future__ import annotations

import difflib
from typing import Any

from orchestrator.core.clock import Clock
from orchestrator.reads import sql_reads, views
from orchestrator.store.db import Sessions
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
        """One saga, or a page of sagas; `waiting`: only those in ready-for-review longer than
        PRESSROOM_REVIEW_REMINDER (all of them when unset). Read through the read port
        (`read_model` over `sql_reads.SqlSagaReads`), as the CLI's quick path reads."""
        with self._sessions() as s:
            return sql_reads.status(
                s,
                saga_id,
                limit=limit,
                after=after,
                waiting=waiting,
                reminder=self._review_reminder,
                now=self._clock.now(),
            )

    def show(self, saga_id: str, version: int | None = None) -> dict[str, Any]:
        """A version (default the head) with its citations and review, through the read port."""
        with self._sessions() as s:
            return sql_reads.show(s, saga_id, version)

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

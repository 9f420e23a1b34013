"""Read use cases: a saga's status (or a page of sagas), a version, a diff, the history."""

from __future__ import annotations

import difflib
from datetime import timedelta
from typing import Any

from sqlmodel import Session

from orchestrator import paging, views
from orchestrator.app import App
from orchestrator.core.errors import InvalidInput, NotFound
from orchestrator.store.tables import utcnow
from sagas import records


def status(
    app: App,
    saga_id: str | None = None,
    *,
    limit: int | None = None,
    after: str | None = None,
    waiting: bool = False,
) -> dict[str, Any]:
    """One saga, or a page of sagas (`paging.list_sagas`); `waiting`: only those in
    ready-for-review longer than PRESSROOM_REVIEW_REMINDER (all of them when unset)."""
    with Session(app.engine) as s:
        if saga_id is None:
            since = utcnow() - timedelta(seconds=app.settings.review_reminder or 0) if waiting else None
            return paging.list_sagas(s, limit=limit, after=after, waiting_since=since)
        if limit is not None or after or waiting:
            raise InvalidInput("--limit, --after and --waiting list sagas; leave out the saga id")
        return views.saga_status(s, records.find_saga(s, saga_id))


def show(app: App, saga_id: str, version: int | None = None) -> dict[str, Any]:
    with Session(app.engine) as s:
        saga = records.find_saga(s, saga_id)
        number = version if version is not None else saga.head_version
        if number == 0:
            raise NotFound(f"saga {saga.id} has no version yet ({saga.state})")
        return views.version_view(s, saga, records.version(s, saga.id, number))


def diff(app: App, saga_id: str, a: int, b: int) -> str:
    with Session(app.engine) as s:
        saga = records.find_saga(s, saga_id)
        va, vb = records.version(s, saga.id, a), records.version(s, saga.id, b)
        lines = difflib.unified_diff(
            va.markdown.splitlines(keepends=True),
            vb.markdown.splitlines(keepends=True),
            fromfile=f"v{a} {va.digest[:12]}",
            tofile=f"v{b} {vb.digest[:12]}",
        )
        return "".join(lines)


def history(app: App, saga_id: str) -> dict[str, Any]:
    with Session(app.engine) as s:
        saga = records.find_saga(s, saga_id)
        return {"saga_id": saga.id, "events": views.events(s, saga.id)}


__all__ = ["diff", "history", "show", "status"]

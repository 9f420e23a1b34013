"""The reviewer's workspace: what the saga, version, diff and queue pages read, and how.

`load_workspace(app, saga_id, number)` reads, in one call (blocking: run it in
a thread), everything the saga page (or the page of one version) shows
beyond the services' status, show and history dicts: the versions with
author, verdict and digest; the document body with its markers and findings
(`document.render_document`), each cited source re-read around its quote; the
timeline's layout (`timeline.layout` over `workspace_views.timeline`); and
the saga's fingerprint for live updates. `load_queue(...)` is the list page,
`load_diff(...)` the side-by-side diff of any two versions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sqlmodel import Session

from orchestrator.core.errors import InvalidInput
from orchestrator.entrypoints.web import word_diff, workspace_views
from orchestrator.entrypoints.web.actions import trace_id_of
from orchestrator.entrypoints.web.document import render_document
from orchestrator.entrypoints.web.timeline import layout
from orchestrator.harness.principals import Principal
from orchestrator.pressroom import Pressroom
from orchestrator.store.comments import comments_on
from orchestrator.store.tables import SagaRow
from sagas import records

PAGE_SIZE = 25
MAX_PAGE = 200


def fingerprint_token(parts: tuple[Any, ...]) -> str:
    """A short token that changes when the saga moves (sent as the SSE event id)."""
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def current_fingerprint(app: Pressroom, saga_id: str) -> str:
    with Session(app.engine) as s:
        return fingerprint_token(workspace_views.fingerprint(s, saga_id))


def load_workspace(
    app: Pressroom, saga_id: str, number: int | None = None, *, with_history: bool = True
) -> dict[str, Any]:
    """Status, the version shown (head when `number` is None), history and the workspace extras."""
    status = app.reads.status(saga_id)
    sid = status["saga_id"]
    version = None
    if number is not None:
        version = app.reads.show(sid, number)
    elif status.get("version"):
        version = app.reads.show(sid)
    history = app.reads.history(sid) if with_history else None
    with Session(app.engine) as s:
        saga = s.get(SagaRow, sid)
        assert saga is not None  # `Reads.status` found it
        versions = workspace_views.versions(s, sid)
        intervals = workspace_views.timeline(s, saga) if with_history else []
        token = fingerprint_token(workspace_views.fingerprint(s, sid))
        corpus = saga.corpus
        trace_id = trace_id_of(saga.trace_context)
        remarks = comments_on(s, sid, int(version["version"])) if version is not None else []
    document = None
    findings: list[Mapping[str, Any]] = []
    if version is not None:
        citations = version.get("citations") or []
        contexts = workspace_views.citation_sources(corpus, citations)
        findings = list((version.get("review") or {}).get("findings") or [])
        document = render_document(version.get("markdown") or "", citations, contexts, findings)
    extras = {
        "versions": versions,
        "document": document,
        "findings": findings,
        "timeline": layout(intervals) if intervals else None,
        "fingerprint": token,
        "trace_id": trace_id,
        "comments": remarks,
    }
    return {"status": status, "version": version, "history": history, "workspace": extras}


def load_queue(
    app: Pressroom,
    *,
    view: str,
    state: str | None,
    search: str | None,
    after: str | None,
    principal: Principal | None,
    limit: int = PAGE_SIZE,
) -> dict[str, Any]:
    """One page of the list: `view` is `all` or `waiting` (for the signed-in reviewer, when closed)."""
    if view not in ("all", "waiting"):
        raise InvalidInput("view must be all or waiting")
    with Session(app.engine) as s:
        page = workspace_views.queue(
            s,
            state=None if view == "waiting" else state,
            search=search,
            waiting=view == "waiting",
            waiting_for=principal if view == "waiting" else None,
            limit=limit,
            after=after,
        )
        waiting = workspace_views.queue(s, waiting=True, waiting_for=principal, limit=1000)
    return {**page, "waiting_count": len(waiting["sagas"]), "waiting_more": waiting["has_more"]}


def load_diff(app: Pressroom, saga_id: str, a: int, b: int) -> dict[str, Any]:
    """Both versions, the side-by-side rows and their summary, and every version for the pickers."""
    status = app.reads.status(saga_id)
    sid = status["saga_id"]
    old, new = app.reads.show(sid, a), app.reads.show(sid, b)
    rows = word_diff.side_by_side(old.get("markdown") or "", new.get("markdown") or "")
    with Session(app.engine) as s:
        records.find_saga(s, sid)
        versions = workspace_views.versions(s, sid)
    return {
        "status": status,
        "old": old,
        "new": new,
        "rows": rows,
        "summary": word_diff.summary(rows),
        "versions": versions,
    }


__all__ = [
    "PAGE_SIZE",
    "current_fingerprint",
    "fingerprint_token",
    "load_diff",
    "load_queue",
    "load_workspace",
]

"""Read queries for the reviewers' workspace pages (read-only; nothing here writes).

- `queue(...)`: a page of sagas, newest first (waiting for review: the
  longest waiting first), filtered by state, by a search
  (saga id prefix, or words in the brief or the head version's title), and
  with `waiting_for` a principal: only sagas in ready-for-review that this
  principal may approve (not its submitter, not an author of a version:
  the same rule `Reviews.approve` applies). Cursors are `paging`'s.
- `versions(...)`: every version's number, author, verdict, digest and time.
- `citation_sources(...)`: each cited source re-read from the saga's corpus,
  with the quote's surrounding lines (`source_context`) and whether the file
  still has the digest it was cited with.
- `timeline(...)`: the saga's actions, message queue waits and approval waits
  as `timeline.Interval`s, from the events and the outbox.
- `fingerprint(...)`: what changes when the saga moves (for live updates).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from sqlalchemy import and_, func, or_, text, tuple_
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from orchestrator.core.errors import InvalidInput, NotFound
from orchestrator.entrypoints.web.source_context import quote_context
from orchestrator.entrypoints.web.timeline import Interval
from orchestrator.harness.principals import Party, Permission, Principal, self_approval
from orchestrator.reads import read_shapes, views
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import WAITING_SQL, EventRow, SagaRow, VersionRow, utcnow
from sagas.machine import SagaState
from sagas.retry import carried_parties
from telemetry import names
from telemetry.render import parse_moment, phase_bounds

MAX_SEARCH = 200
STATES: Final = tuple(state.value for state in SagaState)
_PHASE_KIND: Final = {
    names.PROPOSAL: "proposal",
    names.AUTHORIZATION: "authorization",
    names.SEND: "send",
    names.ACK: "ack",
}


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _parties(s: Session, saga: SagaRow) -> list[Party]:
    rows = s.exec(
        select(VersionRow.number, VersionRow.author, VersionRow.author_id).where(
            VersionRow.saga_id == saga.id
        )
    ).all()
    parties = [Party(saga.created_by_id, saga.created_by, "submitted the saga")]
    return (
        parties
        + [Party(author_id, author, f"wrote version {number}") for number, author, author_id in rows]
        + carried_parties(s, saga.id)
    )


def may_approve(s: Session, saga: SagaRow, principal: Principal) -> bool:
    """Whether `principal` could approve `saga` now (role, state and who took part)."""
    return (
        saga.state == SagaState.READY_FOR_REVIEW.value
        and principal.may(Permission.APPROVE)
        and self_approval(principal, _parties(s, saga)) is None
    )


def queue(
    s: Session,
    *,
    state: str | None = None,
    search: str | None = None,
    waiting_for: Principal | None = None,
    waiting: bool = False,
    limit: int | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """A page of sagas: `{"sagas", "has_more", "next", "limit"}` as `status` lists them."""
    size = read_shapes.check_limit(limit)
    if state and state not in STATES:
        raise InvalidInput(f"unknown state {state!r}; one of {', '.join(STATES)}")
    query = select(SagaRow).outerjoin(
        VersionRow,
        and_(col(VersionRow.saga_id) == SagaRow.id, col(VersionRow.number) == SagaRow.head_version),
    )
    if waiting or waiting_for is not None:
        query = query.where(text(WAITING_SQL))  # `ix_sagas_ready`'s predicate, oldest wait first
    elif state:
        query = query.where(col(SagaRow.state) == state)
    words = (search or "").strip()
    if len(words) > MAX_SEARCH:
        raise InvalidInput(f"the search is at most {MAX_SEARCH} characters")
    if words:
        pattern = _like(words.casefold())
        query = query.where(
            or_(
                col(SagaRow.id).startswith(words.lower(), autoescape=True),
                func.lower(col(SagaRow.brief)).like(pattern, escape="\\"),
                func.lower(col(VersionRow.title)).like(pattern, escape="\\"),
            )
        )
    # Waiting for review: oldest wait first (by ready_at); else newest first (by created_at).
    oldest = waiting or waiting_for is not None
    moment_of = col(SagaRow.ready_at) if oldest else col(SagaRow.created_at)
    query = query.order_by(
        *((moment_of.asc(), col(SagaRow.id).asc()) if oldest else (moment_of.desc(), col(SagaRow.id).desc()))
    )

    def stamp(row: SagaRow) -> datetime:
        return (row.ready_at or row.created_at) if oldest else row.created_at

    kept: list[SagaRow] = []
    cursor = after
    exhausted = False
    while len(kept) <= size and not exhausted:
        batch_query = query
        if cursor:
            moment, last_id = read_shapes.decode_cursor(cursor)
            # A row comparison: the index on (moment, id) starts the scan at the cursor.
            key = tuple_(moment_of, col(SagaRow.id))
            batch_query = batch_query.where(
                key > tuple_(moment, last_id) if oldest else key < tuple_(moment, last_id)
            )
        batch = list(s.exec(batch_query.limit(size + 1)).all())
        exhausted = len(batch) <= size
        for row in batch:
            if waiting_for is None or may_approve(s, row, waiting_for):
                kept.append(row)
        if batch:
            cursor = read_shapes.encode_cursor(stamp(batch[-1]), batch[-1].id)
    has_more = len(kept) > size
    kept = kept[:size]
    sagas = [
        {**views.saga_summary(s, row), "brief": row.brief, "ready_at": views.iso(row.ready_at)}
        for row in kept
    ]
    last = kept[-1] if kept else None
    return {
        "sagas": sagas,
        "has_more": has_more,
        "next": read_shapes.encode_cursor(stamp(last), last.id) if has_more and last else None,
        "limit": size,
    }


def versions(s: Session, saga_id: str) -> list[dict[str, Any]]:
    """Each version, newest first: number, author, verdict, findings, digest, time."""
    query = (
        sa_select(
            col(VersionRow.number),
            col(VersionRow.author),
            col(VersionRow.author_id),
            col(VersionRow.digest),
            col(VersionRow.review),
            col(VersionRow.created_at),
        )
        .where(col(VersionRow.saga_id) == saga_id)
        .order_by(col(VersionRow.number).desc())
    )
    rows = s.execute(query).all()
    out = []
    for number, author, author_id, digest, review, created_at in rows:
        findings = (review or {}).get("findings") or []
        out.append(
            {
                "version": number,
                "author": author,
                "by_person": author_id is not None,
                "verdict": (review or {}).get("verdict"),
                "findings": len(findings),
                "version_digest": digest,
                "created_at": views.iso(created_at),
            }
        )
    return out


def citation_sources(corpus: str, citations: Sequence[Mapping[str, Any]], around: int = 2) -> dict[str, Any]:
    """Per marker: the quote in its source with `around` lines either side (reads the corpus)."""
    from roles.corpus import SourceOutsideCorpus, read_source

    root = Path(corpus)
    read: dict[str, Any] = {}
    out: dict[str, Any] = {}
    for citation in citations:
        source = str(citation.get("source"))
        if source not in read:
            try:
                read[source] = read_source(root, source)
            except (NotFound, InvalidInput, SourceOutsideCorpus, OSError) as exc:
                read[source] = str(exc) or "the source cannot be read"
        loaded = read[source]
        marker = str(citation.get("marker"))
        if isinstance(loaded, str):
            out[marker] = {"lines": None, "changed": None, "problem": loaded}
            continue
        lines = quote_context(loaded.text, str(citation.get("quote") or ""), around)
        out[marker] = {
            "lines": lines,
            "changed": loaded.digest != citation.get("source_digest"),
            "problem": None if lines is not None else "the quote is not in the source as it reads now",
        }
    return out


def _events(s: Session, saga_id: str) -> list[EventRow]:
    return list(s.exec(select(EventRow).where(EventRow.saga_id == saga_id).order_by(col(EventRow.seq))).all())


def _ms(moment: datetime | None, origin: datetime) -> float:
    at = parse_moment(moment)
    return (at - origin).total_seconds() * 1000 if at is not None else 0.0


def timeline(s: Session, saga: SagaRow, now: datetime | None = None) -> list[Interval]:
    """The saga's actions (their four phases), queue waits and approval waits, in ms from its start."""
    rows = _events(s, saga.id)
    outbox = list(
        s.exec(
            select(OutboxRow).where(OutboxRow.saga_id == saga.id).order_by(col(OutboxRow.created_at))
        ).all()
    )
    moments = [parse_moment(r.created_at) for r in rows] + [parse_moment(o.created_at) for o in outbox]
    known = [m for m in moments if m is not None]
    if not known:
        return []
    origin = min(known)
    intervals: list[Interval] = []
    intervals += _queue_waits(rows, outbox, origin)
    intervals += _actions(rows, origin)
    intervals += _approval_waits(rows, origin, parse_moment(now or utcnow()) or origin)
    intervals.sort(key=lambda i: i.start)
    return intervals


def _actions(rows: Iterable[EventRow], origin: datetime) -> list[Interval]:
    out: list[Interval] = []
    seen: dict[str, int] = {}
    for row in rows:
        if row.kind != "tool_call" or row.proposed_at is None:
            continue
        event = views.event_dict(row)
        label = f"{row.actor} · {row.tool or '?'}"
        seen[label] = seen.get(label, 0) + 1
        label += f" ({seen[label]})" if seen[label] > 1 else ""
        for phase, bound in phase_bounds(event).items():
            if bound is None:
                continue
            start, end = bound
            end = end or start
            kind = _PHASE_KIND.get(phase, phase)
            ms = (end - start).total_seconds() * 1000
            title = f"{row.actor} {row.tool}: {kind} {ms:.1f} ms ({row.status})"
            out.append(Interval(label, kind, _ms(start, origin), _ms(end, origin), title))
    return out


def _queue_waits(rows: list[EventRow], outbox: list[OutboxRow], origin: datetime) -> list[Interval]:
    """From a message's creation to the first event after it: the time it waited for a consumer."""
    out: list[Interval] = []
    for message in outbox:
        queued = parse_moment(message.created_at)
        if queued is None:
            continue
        later = [
            parse_moment(r.proposed_at or r.created_at)
            for r in rows
            if (parse_moment(r.created_at) or queued) > queued
            and r.kind not in ("transition", "saga", "message")
        ]
        begun = min((m for m in later if m is not None and m >= queued), default=None)
        if begun is None:
            continue
        wait = (begun - queued).total_seconds() * 1000
        label = f"queue → {message.queue}"
        title = f"message to {message.queue} ({message.task}) waited {wait:.1f} ms for a consumer"
        out.append(Interval(label, "queue", _ms(queued, origin), _ms(begun, origin), title, elastic=True))
    return out


def _approval_waits(rows: list[EventRow], origin: datetime, now: datetime) -> list[Interval]:
    out: list[Interval] = []
    waiting_since: tuple[datetime, int] | None = None
    count = 0
    for row in rows:
        if row.kind != "transition":
            continue
        to = (row.detail or {}).get("to")
        at = parse_moment(row.created_at)
        if at is None:
            continue
        if to == SagaState.READY_FOR_REVIEW.value and waiting_since is None:
            count += 1
            waiting_since = (at, count)
        elif to != SagaState.READY_FOR_REVIEW.value and waiting_since is not None:
            start, n = waiting_since
            ms = (at - start).total_seconds() * 1000
            title = f"waited {ms / 1000:.1f} s for a person ({(row.detail or {}).get('event', to)} by {row.actor})"
            out.append(
                Interval(f"review wait {n}", "approval", _ms(start, origin), _ms(at, origin), title, True)
            )
            waiting_since = None
    if waiting_since is not None:
        start, n = waiting_since
        ms = max((now - start).total_seconds() * 1000, 0.0)
        title = f"waiting for a person for {ms / 1000:.1f} s so far"
        out.append(
            Interval(f"review wait {n}", "approval", _ms(start, origin), _ms(start, origin) + ms, title, True)
        )
    return out


def fingerprint(s: Session, saga_id: str) -> tuple[Any, ...]:
    """Changes whenever the saga moves: its state, head version, and the last event's number."""
    saga = s.get(SagaRow, saga_id)
    if saga is None:
        return ()
    last = s.exec(select(func.max(EventRow.seq)).where(EventRow.saga_id == saga_id)).one()
    return (saga.state, saga.head_version, last, views.iso(saga.updated_at))


__all__ = ["STATES", "citation_sources", "fingerprint", "may_approve", "queue", "timeline", "versions"]

"""Listing sagas a page at a time, newest first, with an opaque cursor.

`{"sagas": [...], "has_more": bool, "next": cursor | null, "limit": n}`: pass
`next` back as `after` for the following page. The cursor names the last
saga shown (its creation time and id), so sagas submitted meanwhile never
shift a page. `waiting_since` keeps only sagas in ready-for-review since
that moment or earlier (`status --waiting`).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from orchestrator import views
from orchestrator.core.errors import InvalidInput
from orchestrator.store.tables import SagaRow
from sagas.machine import SagaState

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000


def encode_cursor(created_at: datetime, saga_id: str) -> str:
    raw = json.dumps([views.iso(created_at), saga_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        moment, saga_id = json.loads(raw)
        when = datetime.fromisoformat(str(moment).replace("Z", "+00:00"))
        if not isinstance(saga_id, str) or not saga_id:
            raise ValueError("no saga id")
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput(f"not a cursor from a previous page: {text[:40]!r}") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)), saga_id


def check_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    if limit < 1 or limit > MAX_LIMIT:
        raise InvalidInput(f"--limit must be between 1 and {MAX_LIMIT}")
    return limit


def list_sagas(
    s: Session, *, limit: int | None = None, after: str | None = None, waiting_since: datetime | None = None
) -> dict[str, Any]:
    size = check_limit(limit)
    query = select(SagaRow)
    if waiting_since is not None:
        query = query.where(
            col(SagaRow.state) == SagaState.READY_FOR_REVIEW.value, col(SagaRow.ready_at) <= waiting_since
        )
    if after:
        moment, saga_id = decode_cursor(after)
        query = query.where(
            or_(
                col(SagaRow.created_at) < moment,
                and_(col(SagaRow.created_at) == moment, col(SagaRow.id) < saga_id),
            )
        )
    query = query.order_by(col(SagaRow.created_at).desc(), col(SagaRow.id).desc()).limit(size + 1)
    rows = list(s.exec(query).all())
    has_more = len(rows) > size
    rows = rows[:size]
    sagas = []
    for row in rows:
        summary = views.saga_summary(s, row)
        if waiting_since is not None:
            summary["ready_at"] = views.iso(row.ready_at)
        sagas.append(summary)
    last = rows[-1] if rows else None
    return {
        "sagas": sagas,
        "has_more": has_more,
        "next": encode_cursor(last.created_at, last.id) if has_more and last else None,
        "limit": size,
    }


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "check_limit", "decode_cursor", "encode_cursor", "list_sagas"]

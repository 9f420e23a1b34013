"""Listing sagas a page at a time, newest first, with an opaque cursor.

`{"sagas": [...], "has_more": bool, "next": cursor | null, "limit": n}`: pass
`next` back as `after` for the following page. The cursor names the last
saga shown (its creation time and id), so sagas submitted meanwhile never
shift a page. `waiting_since` keeps only sagas in ready-for-review since
that moment or earlier (`status --waiting`). The page's shape and the cursor
are `orchestrator.read_shapes`'; this module runs the query.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from orchestrator.read_shapes import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    check_limit,
    decode_cursor,
    encode_cursor,
    saga_page,
)
from orchestrator.store.tables import SagaRow
from sagas import records
from sagas.machine import SagaState


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
    return saga_page(rows, size, lambda row: records.head(s, row), waiting=waiting_since is not None)


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "check_limit", "decode_cursor", "encode_cursor", "list_sagas"]

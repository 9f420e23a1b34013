"""Read models on the store beside the read port: a saga's summary and its events.

`status` and `show` read through the read port (`orchestrator.reads.sql_reads`); the
shapes are defined once, in `orchestrator.reads.read_shapes`.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from orchestrator.core.clock import iso
from orchestrator.reads import read_shapes
from orchestrator.store.tables import EventRow, SagaRow
from sagas import records


def title_of(markdown: str, default: str) -> str:
    for line in markdown.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or default
    return default


def saga_summary(s: Session, saga: SagaRow) -> dict[str, Any]:
    return read_shapes.saga_summary(saga, records.head(s, saga))


def event_dict(row: EventRow) -> dict[str, Any]:
    return {
        "event_id": row.event_id,
        "parent_event_id": row.parent_event_id,
        "saga_id": row.saga_id,
        "actor": row.actor,
        "kind": row.kind,
        "status": row.status,
        "tool": row.tool,
        "artifact_digest": row.artifact_digest,
        "detail": row.detail,
        "created_at": iso(row.created_at),
        "proposed_at": iso(row.proposed_at),
        "authorized_at": iso(row.authorized_at),
        "sent_at": iso(row.sent_at),
        "acked_at": iso(row.acked_at),
        "schema_version": row.schema_version,
    }


def events(s: Session, saga_id: str) -> list[dict[str, Any]]:
    rows = s.exec(select(EventRow).where(EventRow.saga_id == saga_id).order_by(col(EventRow.seq))).all()
    return [event_dict(row) for row in rows]


__all__ = [
    "event_dict",
    "events",
    "iso",
    "saga_summary",
    "title_of",
]

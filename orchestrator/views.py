"""Read models on the store: status, show and history as DESIGN.md publishes them.

The shapes of status and show are defined once, in `orchestrator.read_shapes`;
this module loads the rows for them through a SQLModel session.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from orchestrator import pipeline_shapes, read_shapes
from orchestrator.core.clock import iso
from orchestrator.pipeline_shapes import Spent
from orchestrator.store import model_calls
from orchestrator.store.tables import ApprovalRow, ArtifactRow, EventRow, RoleRunRow, SagaRow, VersionRow
from sagas import records


def title_of(markdown: str, default: str) -> str:
    for line in markdown.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or default
    return default


def saga_summary(s: Session, saga: SagaRow) -> dict[str, Any]:
    return read_shapes.saga_summary(saga, records.head(s, saga))


def saga_status(s: Session, saga: SagaRow) -> dict[str, Any]:
    head = records.head(s, saga)
    steps = records.steps(s, saga.id)
    approval = s.exec(
        select(ApprovalRow).where(ApprovalRow.saga_id == saga.id).order_by(col(ApprovalRow.issued_at).desc())
    ).first()
    return read_shapes.saga_status(saga, head, steps, approval, progress(s, saga))


def version_view(s: Session, saga: SagaRow, version: VersionRow) -> dict[str, Any]:
    evidence = s.get(ArtifactRow, version.evidence_digest) if version.evidence_digest else None
    body = evidence.body if evidence is not None else None
    return read_shapes.version_view(saga, version, body, progress(s, saga))


def progress(s: Session, saga: SagaRow) -> dict[str, Any]:
    """The saga's pipeline, its roles' latest runs and its model usage (`pipeline_shapes`)."""

    def artifact_body(digest: str) -> dict[str, Any] | None:
        row = s.get(ArtifactRow, digest)
        return row.body if row is not None else None

    runs = s.exec(select(RoleRunRow).where(RoleRunRow.saga_id == saga.id)).all()
    body = pipeline_shapes.pipeline_body(saga, artifact_body)
    return pipeline_shapes.progress(saga, body, runs, _spent(s, saga.id))


def _spent(s: Session, saga_id: str) -> list[Spent]:
    """What the saga's answered model calls spent, by role (`store.model_calls.usage`)."""
    bind = s.get_bind()
    engine = bind if isinstance(bind, Engine) else bind.engine
    by_role = model_calls.usage(engine, saga_id)["by_role"]
    return [
        Spent(role, n["model_calls"], n["tokens_in"], n["tokens_out"], n["cost_usd"])
        for role, n in by_role.items()
    ]


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
    }


def events(s: Session, saga_id: str) -> list[dict[str, Any]]:
    rows = s.exec(select(EventRow).where(EventRow.saga_id == saga_id).order_by(col(EventRow.seq))).all()
    return [event_dict(row) for row in rows]


__all__ = [
    "event_dict",
    "events",
    "iso",
    "progress",
    "saga_status",
    "saga_summary",
    "title_of",
    "version_view",
]

"""Read models: the JSON shapes DESIGN.md publishes for status, show and history."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from orchestrator.core.clock import iso
from orchestrator.harness.digests import business_key
from orchestrator.store.tables import ApprovalRow, ArtifactRow, EventRow, SagaRow, VersionRow
from sagas import records


def title_of(markdown: str, default: str) -> str:
    for line in markdown.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or default
    return default


def saga_summary(s: Session, saga: SagaRow) -> dict[str, Any]:
    head = records.head(s, saga)
    return {
        "saga_id": saga.id,
        "state": saga.state,
        "version": saga.head_version,
        "version_digest": head.digest if head else None,
        "title": head.title if head else None,
        "destinations": list(saga.destinations),
        "created_by": saga.created_by,
        "reason": saga.reason,
        "updated_at": iso(saga.updated_at),
    }


def saga_status(s: Session, saga: SagaRow) -> dict[str, Any]:
    head = records.head(s, saga)
    digest = head.digest if head else None
    steps = {step.uri: step for step in records.steps(s, saga.id)}
    destinations = []
    for uri in saga.destinations:
        step = steps.get(uri)
        key = step.idempotency_key if step and step.idempotency_key else None
        if key is None and digest:
            key = business_key(saga.id, uri, digest)
        destinations.append(
            {
                "uri": uri,
                "state": _step_state(saga, step.state if step else "pending"),
                "idempotency_key": key,
                "receipt": step.receipt if step else None,
            }
        )
    approval = s.exec(
        select(ApprovalRow).where(ApprovalRow.saga_id == saga.id).order_by(col(ApprovalRow.issued_at).desc())
    ).first()
    return {
        "saga_id": saga.id,
        "state": saga.state,
        "version": saga.head_version,
        "version_digest": digest,
        "title": head.title if head else None,
        "brief": saga.brief,
        "destinations": destinations,
        "reason": saga.reason,
        "cancel_requested_by": saga.cancel_requested_by,
        "review_rounds": saga.review_rounds,
        "created_by": saga.created_by,
        "created_at": iso(saga.created_at),
        "updated_at": iso(saga.updated_at),
        "approval": _approval(approval) if approval else None,
        # The head's automated review, shown to the approver (a person's version is never redrafted).
        "review": head.review if head else None,
    }


def _step_state(saga: SagaRow, state: str) -> str:
    """A step that never ran in a cancelled saga is `cancelled`, not left `pending`."""
    return "cancelled" if saga.state == "cancelled" and state == "pending" else state


def _approval(row: ApprovalRow) -> dict[str, Any]:
    return {
        "approval_id": row.id,
        "version": row.version,
        "version_digest": row.version_digest,
        "approver": row.approver,
        "expires_at": iso(row.expires_at),
        "consumed_at": iso(row.consumed_at),
        "voided_at": iso(row.voided_at),
    }


def version_view(s: Session, saga: SagaRow, version: VersionRow) -> dict[str, Any]:
    evidence = s.get(ArtifactRow, version.evidence_digest) if version.evidence_digest else None
    flagged: dict[str, list[str]] = {}
    if evidence is not None:
        for item in evidence.body.get("suspicious", []):
            reasons = flagged.setdefault(str(item.get("source")), [])
            reasons.extend(r for r in item.get("reasons", []) if r not in reasons)
    suspicious = [{"source": source, "reasons": reasons} for source, reasons in flagged.items()]
    return {
        "saga_id": saga.id,
        "version": version.number,
        "version_digest": version.digest,
        "title": version.title,
        "author": version.author,
        "created_at": iso(version.created_at),
        "is_head": version.number == saga.head_version,
        "markdown": version.markdown,
        "citations": version.citations,
        "review": version.review,
        "evidence_digest": version.evidence_digest,
        "suspicious_sources": suspicious,
    }


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


__all__ = ["event_dict", "events", "iso", "saga_status", "saga_summary", "title_of", "version_view"]

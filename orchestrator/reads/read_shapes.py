"""The one definition of the JSON shapes of `status` and `show`. No I/O.

DESIGN.md publishes these shapes (`status SAGA_ID --json`, `status --json`
as a page of sagas, `show SAGA_ID --json`). `orchestrator.reads.read_model` fills
them from the records of a read port (`SagaReads`), whose adapters are
`orchestrator.reads.sql_reads` (a SQLAlchemy session: every database, every entry
point), `orchestrator.reads.sqlite_reads` and `orchestrator.reads.pg_reads` (the CLI's
quick path); `orchestrator.reads.views` and `orchestrator.paging` fill them from a
session too. Each hands the records it loaded to the functions here, so none
writes a shape of its own. A record is anything with the attributes of its
row (a SQLModel row, or a named tuple of the same names). The pipeline part
of them (`pipeline`, `roles`, `usage`) is built by `orchestrator.reads.pipeline_shapes`
and handed in as `progress`.

Also here, because every reader pages alike: the opaque page cursor (the
creation time and id of the last saga shown, base64 JSON), the checks of the
paging flags, and the error of `show` for a saga with no version yet, each
worded once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from orchestrator.core.clock import iso
from orchestrator.core.errors import InvalidInput, NotFound

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000


class SagaRecord(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def brief(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def head_version(self) -> int: ...
    @property
    def destinations(self) -> list[str]: ...
    @property
    def review_rounds(self) -> int: ...
    @property
    def created_by(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def cancel_requested_by(self) -> str | None: ...
    @property
    def ready_at(self) -> datetime | None: ...
    @property
    def pipeline(self) -> str: ...
    @property
    def pipeline_digest(self) -> str | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...


class VersionRecord(Protocol):
    @property
    def number(self) -> int: ...
    @property
    def digest(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def author(self) -> str: ...
    @property
    def markdown(self) -> str: ...
    @property
    def citations(self) -> list[dict[str, Any]]: ...
    @property
    def evidence_digest(self) -> str | None: ...
    @property
    def review(self) -> dict[str, Any] | None: ...
    @property
    def created_at(self) -> datetime: ...


class StepRecord(Protocol):
    @property
    def uri(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def idempotency_key(self) -> str | None: ...
    @property
    def receipt(self) -> dict[str, Any] | None: ...


class ApprovalRecord(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def version_digest(self) -> str: ...
    @property
    def approver(self) -> str: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def consumed_at(self) -> datetime | None: ...
    @property
    def voided_at(self) -> datetime | None: ...


def saga_summary(saga: SagaRecord, head: VersionRecord | None) -> dict[str, Any]:
    """One saga in a page of `status`."""
    return {
        "saga_id": saga.id,
        "state": saga.state,
        "version": saga.head_version,
        "version_digest": head.digest if head else None,
        "title": head.title if head else None,
        "destinations": list(saga.destinations),
        "created_by": saga.created_by,
        "reason": saga.reason,
        "pipeline": saga.pipeline,
        "updated_at": iso(saga.updated_at),
    }


def saga_status(
    saga: SagaRecord,
    head: VersionRecord | None,
    steps: Sequence[StepRecord],
    approval: ApprovalRecord | None,
    progress: Mapping[str, Any],
) -> dict[str, Any]:
    """`status SAGA_ID`: `steps` are the saga's publishing steps, `approval` its latest one,
    `progress` its pipeline, roles and usage (`orchestrator.reads.pipeline_shapes.progress`)."""
    from orchestrator.harness.digests import business_key  # hashlib: only a saga's status needs it

    digest = head.digest if head else None
    by_uri = {step.uri: step for step in steps}
    destinations = []
    for uri in saga.destinations:
        step = by_uri.get(uri)
        key = step.idempotency_key if step and step.idempotency_key else None
        if key is None and digest:
            key = business_key(saga.id, uri, digest)
        destinations.append(
            {
                "uri": uri,
                "state": step_state(saga, step.state if step else "pending"),
                "idempotency_key": key,
                "receipt": step.receipt if step else None,
            }
        )
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
        **progress,
    }


def step_state(saga: SagaRecord, state: str) -> str:
    """A step that never ran in a cancelled saga is `cancelled`, not left `pending`."""
    return "cancelled" if saga.state == "cancelled" and state == "pending" else state


def _approval(row: ApprovalRecord) -> dict[str, Any]:
    return {
        "approval_id": row.id,
        "version": row.version,
        "version_digest": row.version_digest,
        "approver": row.approver,
        "expires_at": iso(row.expires_at),
        "consumed_at": iso(row.consumed_at),
        "voided_at": iso(row.voided_at),
    }


def version_view(
    saga: SagaRecord,
    version: VersionRecord,
    evidence: dict[str, Any] | None,
    progress: Mapping[str, Any],
) -> dict[str, Any]:
    """`show SAGA_ID`: `evidence` is the body of the version's evidence artifact, if stored;
    `progress` the saga's pipeline, roles and usage, as in `status`."""
    flagged: dict[str, list[str]] = {}
    if evidence is not None:
        for item in evidence.get("suspicious", []):
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
        **progress,
    }


# -- pages ----------------------------------------------------------------------------


def waiting_since(now: datetime, reminder: float | None) -> datetime:
    """`status --waiting`: in ready-for-review since this moment or earlier."""
    return now - timedelta(seconds=reminder or 0)


def encode_cursor(created_at: datetime, saga_id: str) -> str:
    import base64

    raw = json.dumps([iso(created_at), saga_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[datetime, str]:
    import base64
    import binascii

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


def check_one_saga(limit: int | None, after: str | None, waiting: bool) -> None:
    """`status SAGA_ID` takes none of the flags that page the list of sagas."""
    if limit is not None or after or waiting:
        raise InvalidInput("--limit, --after and --waiting list sagas; leave out the saga id")


def no_version_yet(saga: SagaRecord) -> NotFound:
    """`show` of a saga that has no version yet (its head is 0)."""
    return NotFound(f"saga {saga.id} has no version yet ({saga.state})")


Row = TypeVar("Row", bound=SagaRecord)


def saga_page(
    rows: Sequence[Row],
    size: int,
    head: Callable[[Row], VersionRecord | None],
    *,
    waiting: bool,
) -> dict[str, Any]:
    """A page from up to `size + 1` rows, newest first (the extra row says there is more);
    `head` loads a kept row's head version."""
    has_more = len(rows) > size
    kept = rows[:size]
    sagas = []
    for row in kept:
        summary = saga_summary(row, head(row))
        if waiting:
            summary["ready_at"] = iso(row.ready_at)
        sagas.append(summary)
    last = kept[-1] if kept else None
    return {
        "sagas": sagas,
        "has_more": has_more,
        "next": encode_cursor(last.created_at, last.id) if has_more and last else None,
        "limit": size,
    }


__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "ApprovalRecord",
    "SagaRecord",
    "StepRecord",
    "VersionRecord",
    "check_limit",
    "check_one_saga",
    "decode_cursor",
    "encode_cursor",
    "no_version_yet",
    "saga_page",
    "saga_status",
    "saga_summary",
    "step_state",
    "version_view",
    "waiting_since",
]

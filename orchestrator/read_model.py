"""The read port of `status` and `show`, and those two reads on it. No I/O here.

`SagaReads` is what a read needs from a store: a saga by id or prefix, a
page of sagas, a version, the steps, the latest approval, an artifact's
body, the runs of its pipeline's roles, what its model calls spent by role,
and whether the caller may read at all. Its adapter is
`orchestrator.sqlite_reads.SqliteReads` (standard-library SQLite, for
a CLI that starts fast); every other database, and every other entry point,
reads through the store's SQLModel path (`orchestrator.reads.Reads.status` and
`show`). Both paths fill the one set of shapes in `orchestrator.read_shapes`.

The reads here answer only what they are sure of. Anything else — an
unknown or ambiguous saga, a version that does not exist, bad paging flags,
closed mode without a valid token — raises `Unanswered`, and the caller asks
the full path, whose answer (the same JSON, or the same error and exit code)
is the one DESIGN.md defines. So this path is never more permissive and
never words an error of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from orchestrator import pipeline_shapes, read_shapes
from orchestrator.pipeline_shapes import RoleRunRecord, Spent
from orchestrator.read_shapes import ApprovalRecord, SagaRecord, StepRecord, VersionRecord


class Unanswered(Exception):
    """This reader cannot answer for sure; ask the full path."""


class SagaReads(Protocol):
    def any_user(self) -> bool: ...
    def token_is_valid(self, token: str) -> bool: ...
    def find_saga(self, ref: str) -> SagaRecord | None: ...
    def sagas(
        self, limit: int, *, after: tuple[datetime, str] | None, ready_since: datetime | None
    ) -> Sequence[SagaRecord]: ...
    def version(self, saga_id: str, number: int) -> VersionRecord | None: ...
    def steps(self, saga_id: str) -> Sequence[StepRecord]: ...
    def latest_approval(self, saga_id: str) -> ApprovalRecord | None: ...
    def artifact_body(self, digest: str) -> dict[str, Any] | None: ...
    def role_runs(self, saga_id: str) -> Sequence[RoleRunRecord]: ...
    def spent(self, saga_id: str) -> Sequence[Spent]: ...


def may_read(reads: SagaReads, token: str | None) -> None:
    """Open mode: anyone reads. Closed mode: only with a valid token (else `Unanswered`,
    and the full path refuses with its own words and exit 4)."""
    if not reads.any_user():
        return
    if not token or not reads.token_is_valid(token.strip()):
        raise Unanswered("closed mode without a valid token")


def _head(reads: SagaReads, saga: SagaRecord) -> VersionRecord | None:
    return None if saga.head_version == 0 else _need(reads.version(saga.id, saga.head_version))


T = TypeVar("T")


def _need(value: T | None) -> T:
    if value is None:
        raise Unanswered("not found")
    return value


def status(
    reads: SagaReads,
    saga_id: str | None,
    *,
    limit: int | None,
    after: str | None,
    waiting: bool,
    reminder: float | None,
    now: datetime,
) -> dict[str, Any]:
    """As `Reads.status`: one saga, or a page of sagas."""
    if saga_id is None:
        size = read_shapes.check_limit(limit)
        since = read_shapes.waiting_since(now, reminder) if waiting else None
        cursor = read_shapes.decode_cursor(after) if after else None
        rows = reads.sagas(size + 1, after=cursor, ready_since=since)
        return read_shapes.saga_page(rows, size, lambda row: _head(reads, row), waiting=since is not None)
    if limit is not None or after or waiting:
        raise Unanswered("paging flags with a saga id")
    saga = _need(reads.find_saga(saga_id))
    return read_shapes.saga_status(
        saga, _head(reads, saga), reads.steps(saga.id), reads.latest_approval(saga.id), _progress(reads, saga)
    )


def show(reads: SagaReads, saga_id: str, number: int | None) -> dict[str, Any]:
    """As `services.show`: a version (default the head) with its citations and review."""
    saga = _need(reads.find_saga(saga_id))
    wanted = number if number is not None else saga.head_version
    version = _need(reads.version(saga.id, wanted))
    evidence = reads.artifact_body(version.evidence_digest) if version.evidence_digest else None
    return read_shapes.version_view(saga, version, evidence, _progress(reads, saga))


def _progress(reads: SagaReads, saga: SagaRecord) -> dict[str, Any]:
    """The saga's pipeline, its roles' latest runs and its model usage (`pipeline_shapes`)."""
    body = pipeline_shapes.pipeline_body(saga, reads.artifact_body)
    return pipeline_shapes.progress(saga, body, reads.role_runs(saga.id), reads.spent(saga.id))


__all__ = ["SagaReads", "Unanswered", "may_read", "show", "status"]

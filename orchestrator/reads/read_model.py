"""The read port of `status` and `show`, and those two reads on it. No I/O here.

`SagaReads` is what a read needs from a store: a saga by id or prefix, a
page of sagas, a version, the steps, the latest approval, an artifact's
body, the runs of its pipeline's roles, what its model calls spent by role,
and whether the caller may read at all. Its adapters:

* `orchestrator.reads.sql_reads.SqlSagaReads`: a SQLAlchemy session, on every
  database, for every entry point (the full path);
* `orchestrator.reads.sqlite_reads.SqliteReads` and `orchestrator.reads.pg_reads.PgReads`:
  the standard library's sqlite3 and psycopg alone, for a CLI that starts
  fast (the quick path, `orchestrator.entrypoints.fast_reads`).

Errors, by who words them:

* the request's own: paging flags with a saga id, a bad limit or cursor,
  `show` of a saga with no version yet: `InvalidInput` or `NotFound`, worded
  once in `orchestrator.reads.read_shapes`, whichever adapter reads;
* a lookup that finds nothing: the full path's adapter raises the precise
  error itself (`sagas.records.find_saga` and `version`: an over-long id,
  an unknown or ambiguous saga, a missing version); a quick adapter returns
  None, and the read raises `Unanswered`;
* what a quick adapter leaves to the full path (closed mode without a valid
  token, a page bound to a moment on PostgreSQL): `Unanswered`.

The quick path gives up on any error, and the CLI asks the full path, whose
answer (the same JSON, or the same error and exit code) is the one DESIGN.md
defines. So the quick path is never more permissive, and every error a user
sees comes from the full path.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from orchestrator.reads import pipeline_shapes, read_shapes
from orchestrator.reads.pipeline_shapes import RoleRunRecord, Spent
from orchestrator.reads.read_shapes import ApprovalRecord, SagaRecord, StepRecord, VersionRecord


class Unanswered(Exception):
    """A quick adapter cannot answer for sure; ask the full path."""


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
    """One saga, or a page of sagas (newest first, after the cursor `after`; with `waiting`,
    those in ready-for-review for `reminder` seconds or longer at `now`)."""
    if saga_id is None:
        size = read_shapes.check_limit(limit)
        since = read_shapes.waiting_since(now, reminder) if waiting else None
        cursor = read_shapes.decode_cursor(after) if after else None
        rows = reads.sagas(size + 1, after=cursor, ready_since=since)
        return read_shapes.saga_page(rows, size, lambda row: _head(reads, row), waiting=since is not None)
    read_shapes.check_one_saga(limit, after, waiting)
    saga = _need(reads.find_saga(saga_id))
    return read_shapes.saga_status(
        saga, _head(reads, saga), reads.steps(saga.id), reads.latest_approval(saga.id), _progress(reads, saga)
    )


def show(reads: SagaReads, saga_id: str, number: int | None) -> dict[str, Any]:
    """A version (default the head) with its citations and review."""
    saga = _need(reads.find_saga(saga_id))
    wanted = number if number is not None else saga.head_version
    if wanted == 0:
        raise read_shapes.no_version_yet(saga)
    version = _need(reads.version(saga.id, wanted))
    evidence = reads.artifact_body(version.evidence_digest) if version.evidence_digest else None
    return read_shapes.version_view(saga, version, evidence, _progress(reads, saga))


def _progress(reads: SagaReads, saga: SagaRecord) -> dict[str, Any]:
    """The saga's pipeline, its roles' latest runs and its model usage (`pipeline_shapes`)."""
    body = pipeline_shapes.pipeline_body(saga, reads.artifact_body)
    return pipeline_shapes.progress(saga, body, reads.role_runs(saga.id), reads.spent(saga.id))


__all__ = ["SagaReads", "Unanswered", "may_read", "show", "status"]

"""The read port (`orchestrator.reads.read_model.SagaReads`) on a SQLite file, with the standard library.

For the CLI's read commands only: it starts in a few milliseconds where the
store's SQLModel path first imports SQLAlchemy and SQLModel. It never writes:
the file is opened `mode=rw` (a WAL database needs its shared-memory file)
but only SELECTs run, inside one deferred transaction, so every answer
comes from one snapshot, as a SQLModel session's would.

It reads the rows the SQLModel tables wrote (`orchestrator.store.tables`,
`people_tables`) the way SQLAlchemy's SQLite dialect reads them: datetimes
with `datetime.fromisoformat` (stored naive, in UTC), JSON with `json.loads`,
booleans as integers; and it binds datetimes in the dialect's storage format,
so comparisons in SQL match the SQLModel path's exactly.

`open_at_head` gives no reader when the file is missing or its schema is not
at the head migration (found from the migration files, without Alembic):
such a database needs the upgrade that only the full path runs.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from orchestrator.reads.pipeline_shapes import Spent
from orchestrator.store.migration_head import head_from_files

MIGRATION_VERSIONS = Path(__file__).resolve().parents[1] / "store" / "migrations" / "versions"
MAX_SAGA_ID = 64  # as sagas.records.find_saga: longer is refused there
MAX_VERSION = 2**31 - 1
_HEX = re.compile(r"[0-9a-f]+")


def head_revision(folder: Path = MIGRATION_VERSIONS) -> str | None:
    """The head of the migration chain in `folder`, or None when it is not one plain chain."""
    return head_from_files(folder)


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _json(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def sql_datetime(moment: datetime) -> str:
    """A datetime bound as SQLAlchemy's SQLite dialect binds it (its wall time; the offset is dropped)."""
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{moment.microsecond:06d}"
    )


class SagaRec(NamedTuple):
    id: str
    brief: str
    state: str
    head_version: int
    destinations: list[str]
    review_rounds: int
    created_by: str
    reason: str | None
    cancel_requested_by: str | None
    ready_at: datetime | None
    pipeline: str
    pipeline_digest: str | None
    created_at: datetime
    updated_at: datetime


class VersionRec(NamedTuple):
    number: int
    digest: str
    title: str
    author: str
    markdown: str
    citations: list[dict[str, Any]]
    evidence_digest: str | None
    review: dict[str, Any] | None
    created_at: datetime


class StepRec(NamedTuple):
    uri: str
    state: str
    idempotency_key: str | None
    receipt: dict[str, Any] | None


class ApprovalRec(NamedTuple):
    id: str
    version: int
    version_digest: str
    approver: str
    expires_at: datetime
    consumed_at: datetime | None
    voided_at: datetime | None


class RoleRunRec(NamedTuple):
    role: str
    round: int
    state: str
    verdict: str | None
    reason: str | None


# What a saga's answered model calls spent, by role, as `orchestrator.store.model_calls.usage` sums it.
SPENT_SQL = (
    "SELECT role, COUNT(*), COALESCE(SUM(tokens_in), 0), COALESCE(SUM(tokens_out), 0), "
    "COALESCE(SUM(cost_usd), 0.0) FROM model_calls WHERE saga_id = {p} AND state = 'answered' "
    "GROUP BY role ORDER BY role"
)
ROLE_RUNS_SQL = (
    f"SELECT {', '.join(RoleRunRec._fields)} FROM role_runs WHERE saga_id = {{p}} ORDER BY round, role"
)


# Columns read as SQLAlchemy's SQLite dialect reads them; every other column is taken as stored.
_DATETIMES = frozenset({"ready_at", "created_at", "updated_at", "expires_at", "consumed_at", "voided_at"})
_JSONS = frozenset({"destinations", "citations", "review", "receipt", "body"})
R = TypeVar("R", bound=tuple[Any, ...])


def _columns(record: type[tuple[Any, ...]]) -> str:
    return ", ".join(record._fields)  # type: ignore[attr-defined]


def _record(record: type[R], row: tuple[Any, ...]) -> R:
    values = []
    for name, value in zip(record._fields, row, strict=True):  # type: ignore[attr-defined]
        if name in _DATETIMES:
            value = _when(value)
        elif name in _JSONS:
            value = _json(value)
        values.append(value)
    return record(*values)


_SAGA = f"SELECT {_columns(SagaRec)} FROM sagas"


class SqliteReads:
    """`SagaReads` on one open connection; use as a context manager (the snapshot ends on exit)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    def open_at_head(cls, path: Path) -> SqliteReads | None:
        """A reader of `path`, or None when the file is missing or not at the head revision."""
        if not path.is_file():
            return None
        head = head_revision()
        conn = sqlite3.connect(
            path.resolve().as_uri() + "?mode=rw", uri=True, timeout=30, isolation_level=None
        )
        try:
            conn.execute("BEGIN")
            row = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.Error:
            conn.close()
            return None
        if head is None or row != [(head,)]:
            conn.close()
            return None
        return cls(conn)

    def __enter__(self) -> SqliteReads:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.conn.rollback()
        finally:
            self.conn.close()

    # -- people -------------------------------------------------------------------
    def any_user(self) -> bool:
        return self.conn.execute("SELECT users.id FROM users LIMIT 1").fetchone() is not None

    def token_is_valid(self, token: str) -> bool:
        """As `SqlPeopleStore.authenticate` accepts: the token's sha256 found, compared again in
        constant time, the token not revoked, its user active."""
        from orchestrator.harness.principals import token_hash, token_matches

        if not token:
            return False
        found = self.conn.execute(
            "SELECT api_tokens.token_hash, api_tokens.revoked_at, users.active FROM api_tokens "
            "JOIN users ON users.id = api_tokens.user_id WHERE api_tokens.token_hash = ?",
            (token_hash(token),),
        ).fetchone()
        if found is None:
            return False
        stored, revoked_at, active = found
        return token_matches(token, stored) and revoked_at is None and bool(active)

    # -- sagas ----------------------------------------------------------------------
    def find_saga(self, ref: str) -> SagaRec | None:
        """By id, or by a unique lowercase-hex prefix of at least 6 characters (as `records.find_saga`)."""
        if len(ref) > MAX_SAGA_ID:
            return None
        row = self.conn.execute(_SAGA + " WHERE id = ?", (ref,)).fetchone()
        if row is not None:
            return _record(SagaRec, row)
        if len(ref) >= 6 and _HEX.fullmatch(ref):
            rows = self.conn.execute(_SAGA + " WHERE id LIKE ? ESCAPE '/' LIMIT 2", (ref + "%",)).fetchall()
            if len(rows) == 1:
                return _record(SagaRec, rows[0])
        return None

    def sagas(
        self, limit: int, *, after: tuple[datetime, str] | None, ready_since: datetime | None
    ) -> list[SagaRec]:
        """Up to `limit` sagas, newest first, after the cursor, in ready-for-review since `ready_since`."""
        where: list[str] = []
        args: list[Any] = []
        if ready_since is not None:
            from sagas.machine import SagaState

            where.append("state = ? AND ready_at <= ?")
            args += [SagaState.READY_FOR_REVIEW.value, sql_datetime(ready_since)]
        if after is not None:
            moment, saga_id = after
            where.append("(created_at, id) < (?, ?)")  # a row value: the index starts at the cursor
            args += [sql_datetime(moment), saga_id]
        query = _SAGA + (" WHERE " + " AND ".join(where) if where else "")
        rows = self.conn.execute(query + " ORDER BY created_at DESC, id DESC LIMIT ?", (*args, limit))
        return [_record(SagaRec, row) for row in rows.fetchall()]

    def version(self, saga_id: str, number: int) -> VersionRec | None:
        if not 1 <= number <= MAX_VERSION:
            return None
        row = self.conn.execute(
            f"SELECT {_columns(VersionRec)} FROM versions WHERE saga_id = ? AND number = ?", (saga_id, number)
        ).fetchone()
        return None if row is None else _record(VersionRec, row)

    def head(self, saga: SagaRec) -> VersionRec | None:
        return None if saga.head_version == 0 else self.version(saga.id, saga.head_version)

    def steps(self, saga_id: str) -> list[StepRec]:
        rows = self.conn.execute(
            f"SELECT {_columns(StepRec)} FROM steps WHERE saga_id = ? ORDER BY position", (saga_id,)
        ).fetchall()
        return [_record(StepRec, row) for row in rows]

    def latest_approval(self, saga_id: str) -> ApprovalRec | None:
        row = self.conn.execute(
            f"SELECT {_columns(ApprovalRec)} FROM approvals WHERE saga_id = ? ORDER BY issued_at DESC",
            (saga_id,),
        ).fetchone()
        return None if row is None else _record(ApprovalRec, row)

    def artifact_body(self, digest: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT body FROM artifacts WHERE digest = ?", (digest,)).fetchone()
        return None if row is None else _json(row[0])

    def role_runs(self, saga_id: str) -> list[RoleRunRec]:
        rows = self.conn.execute(ROLE_RUNS_SQL.format(p="?"), (saga_id,)).fetchall()
        return [RoleRunRec(*row) for row in rows]

    def spent(self, saga_id: str) -> list[Spent]:
        rows = self.conn.execute(SPENT_SQL.format(p="?"), (saga_id,)).fetchall()
        return [Spent(role, int(n), int(t_in), int(t_out), float(c)) for role, n, t_in, t_out, c in rows]


__all__ = [
    "ROLE_RUNS_SQL",
    "SPENT_SQL",
    "ApprovalRec",
    "RoleRunRec",
    "SagaRec",
    "SqliteReads",
    "StepRec",
    "VersionRec",
    "head_revision",
    "sql_datetime",
]

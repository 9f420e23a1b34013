"""The read port (`orchestrator.reads.read_model.SagaReads`) on PostgreSQL, with psycopg alone.

For the CLI's `status` and `show` only, as `orchestrator.reads.sqlite_reads` is for a
SQLite file: it starts without SQLAlchemy, SQLModel, Alembic or pydantic. It
never writes: one read-only transaction (`REPEATABLE READ`, so every answer comes
from one snapshot), SELECTs only, and the connection closed at the end.

psycopg gives the columns the types SQLAlchemy's psycopg dialect gives them:
`timestamptz` as aware datetimes in the session's time zone, `json` parsed,
booleans as booleans; so the shapes (`orchestrator.reads.read_shapes`) come out the
same on both paths (`tests/e2e/test_read_paths.py`).

`open_at_head` gives no reader when the database cannot be reached at once, or
its schema is not at the head migration (one query of `alembic_version`,
compared with the head read from the migration files, without Alembic): such
a database needs the full path, which retries, upgrades or says why. A page of
sagas after a cursor, or of those waiting for review, binds a moment in SQL;
this reader leaves those to the full path (`Unanswered`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.reads.pipeline_shapes import Spent
from orchestrator.reads.read_model import Unanswered
from orchestrator.reads.sqlite_reads import (
    MAX_SAGA_ID,
    MAX_VERSION,
    ROLE_RUNS_SQL,
    SPENT_SQL,
    ApprovalRec,
    RoleRunRec,
    SagaRec,
    StepRec,
    VersionRec,
    head_revision,
)

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT = 3  # seconds; then the full path, with its retries, takes over
_HEX = re.compile(r"[0-9a-f]+")
R = TypeVar("R", bound=tuple[Any, ...])


def _columns(record: type[tuple[Any, ...]]) -> str:
    return ", ".join(record._fields)  # type: ignore[attr-defined]


def _saga_query(where: str) -> str:
    return f"SELECT {_columns(SagaRec)} FROM sagas WHERE {where}"


class PgReads:
    """`SagaReads` on one open connection; use as a context manager (the snapshot ends on exit)."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.conn = conn

    @classmethod
    def open_at_head(cls, conninfo: str) -> PgReads | None:
        """A reader of the database at `conninfo` (a libpq URL), or None when it cannot be
        reached at once or is not at the head revision."""
        import psycopg

        head = head_revision()
        if head is None:
            return None
        try:
            conn = psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error:
            return None
        try:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        except psycopg.Error:
            conn.close()
            return None
        if rows != [(head,)]:
            conn.close()
            return None
        return cls(conn)

    def __enter__(self) -> PgReads:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.conn.rollback()
        finally:
            self.conn.close()

    def _one(self, record: type[R], query: str, args: tuple[Any, ...]) -> R | None:
        row = self.conn.execute(query, args).fetchone()
        return None if row is None else record(*row)

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
            "JOIN users ON users.id = api_tokens.user_id WHERE api_tokens.token_hash = %s",
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
        found = self._one(SagaRec, _saga_query("id = %s"), (ref,))
        if found is not None:
            return found
        if len(ref) >= 6 and _HEX.fullmatch(ref):
            rows = self.conn.execute(_saga_query("id LIKE %s LIMIT 2"), (ref + "%",)).fetchall()
            if len(rows) == 1:
                return SagaRec(*rows[0])
        return None

    def sagas(
        self, limit: int, *, after: tuple[datetime, str] | None, ready_since: datetime | None
    ) -> list[SagaRec]:
        """The newest `limit` sagas; a cursor or a waiting list is the full path's to answer."""
        if after is not None or ready_since is not None:
            raise Unanswered("a moment bound in SQL: the full path binds it")
        rows = self.conn.execute(
            f"SELECT {_columns(SagaRec)} FROM sagas ORDER BY created_at DESC, id DESC LIMIT %s", (limit,)
        ).fetchall()
        return [SagaRec(*row) for row in rows]

    def version(self, saga_id: str, number: int) -> VersionRec | None:
        if not 1 <= number <= MAX_VERSION:
            return None
        return self._one(
            VersionRec,
            f"SELECT {_columns(VersionRec)} FROM versions WHERE saga_id = %s AND number = %s",
            (saga_id, number),
        )

    def steps(self, saga_id: str) -> list[StepRec]:
        rows = self.conn.execute(
            f"SELECT {_columns(StepRec)} FROM steps WHERE saga_id = %s ORDER BY position", (saga_id,)
        ).fetchall()
        return [StepRec(*row) for row in rows]

    def latest_approval(self, saga_id: str) -> ApprovalRec | None:
        return self._one(
            ApprovalRec,
            f"SELECT {_columns(ApprovalRec)} FROM approvals WHERE saga_id = %s ORDER BY issued_at DESC LIMIT 1",
            (saga_id,),
        )

    def artifact_body(self, digest: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT body FROM artifacts WHERE digest = %s", (digest,)).fetchone()
        return None if row is None else dict(row[0])

    def role_runs(self, saga_id: str) -> list[RoleRunRec]:
        rows = self.conn.execute(ROLE_RUNS_SQL.format(p="%s"), (saga_id,)).fetchall()
        return [RoleRunRec(*row) for row in rows]

    def spent(self, saga_id: str) -> list[Spent]:
        rows = self.conn.execute(SPENT_SQL.format(p="%s"), (saga_id,)).fetchall()
        return [Spent(role, int(n), int(t_in), int(t_out), float(c)) for role, n, t_in, t_out, c in rows]


__all__ = ["PgReads"]

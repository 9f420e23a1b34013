"""The read port (`orchestrator.reads.read_model.SagaReads`) on a SQLAlchemy session, and `status` and
`show` through it: the full path of those reads, on every database, for every entry point.

`SqlSagaReads` reads the SQLModel tables (`orchestrator.store.tables`,
`people_tables`, the `model_calls` table) inside the caller's session, so every
answer comes from that session's transaction, and gives the records of the
quick adapters (`orchestrator.reads.sqlite_reads`: `SagaRec`, `VersionRec`, ...),
each column as SQLAlchemy's dialect loads it. It never writes.

Unlike the quick adapters it never answers None for a lookup: a saga is found
by `sagas.records.find_saga` and a version by `sagas.records.version`, which
raise the precise `InvalidInput` (an id over 64 characters) or `NotFound` (an
unknown or ambiguous saga, a missing version), so `read_model` never raises
`Unanswered` on this adapter, and what it raises is what DESIGN.md defines.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Table, text, tuple_
from sqlalchemy import select as sa_select
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, SQLModel

from orchestrator.reads import read_model
from orchestrator.reads.pipeline_shapes import Spent
from orchestrator.reads.sqlite_reads import ApprovalRec, RoleRunRec, SagaRec, StepRec, VersionRec
from orchestrator.store import model_calls
from orchestrator.store.people import any_user
from orchestrator.store.people_tables import TokenRow, UserRow
from orchestrator.store.tables import WAITING_SQL, ApprovalRow, ArtifactRow, RoleRunRow, SagaRow, StepRow
from sagas import records

R = TypeVar("R", bound=tuple[Any, ...])


def _table(row: type[SQLModel]) -> Table:
    table: Table = row.__table__  # type: ignore[attr-defined]
    return table


def _columns(row: type[SQLModel], record: type[tuple[Any, ...]]) -> list[ColumnElement[Any]]:
    """The columns of `row`'s table named as `record`'s fields, in their order."""
    table = _table(row)
    return [table.c[name] for name in record._fields]  # type: ignore[attr-defined]


def _of(record: type[R], row: object) -> R:
    """`record` from the attributes of a loaded ORM row."""
    return record(*(getattr(row, name) for name in record._fields))  # type: ignore[attr-defined]


_SAGAS = _table(SagaRow)


class SqlSagaReads:
    """`SagaReads` in one open session; the caller owns the session (and its transaction)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def _rows(self, query: Any) -> Sequence[Any]:
        return self.session.connection().execute(query).all()

    # -- people -------------------------------------------------------------------
    def any_user(self) -> bool:
        return any_user(self.session)

    def token_is_valid(self, token: str) -> bool:
        """As `SqlPeopleStore.authenticate` accepts: the token's sha256 found, compared again in
        constant time, the token not revoked, its user active."""
        from orchestrator.harness.principals import token_hash, token_matches

        if not token:
            return False
        tokens, users = _table(TokenRow).c, _table(UserRow).c
        found = self._rows(
            sa_select(tokens.token_hash, tokens.revoked_at, users.active)
            .join_from(_table(TokenRow), _table(UserRow), users.id == tokens.user_id)
            .where(tokens.token_hash == token_hash(token))
        )
        if not found:
            return False
        stored, revoked_at, active = found[0]
        return token_matches(token, stored) and revoked_at is None and bool(active)

    # -- sagas ----------------------------------------------------------------------
    def find_saga(self, ref: str) -> SagaRec:
        """By id, or by a unique lowercase-hex prefix of at least 6 characters; else the
        `InvalidInput` or `NotFound` of `records.find_saga`."""
        return _of(SagaRec, records.find_saga(self.session, ref))

    def sagas(
        self, limit: int, *, after: tuple[datetime, str] | None, ready_since: datetime | None
    ) -> list[SagaRec]:
        """Up to `limit` sagas, newest first, after the cursor, in ready-for-review since `ready_since`."""
        c = _SAGAS.c
        query = sa_select(*_columns(SagaRow, SagaRec))
        if ready_since is not None:
            query = query.where(text(WAITING_SQL), c.ready_at <= ready_since)
        if after is not None:
            moment, saga_id = after
            # A row comparison, so the index (created_at, id) starts the scan at the cursor:
            # a page deep in the history costs what the first one does.
            query = query.where(tuple_(c.created_at, c.id) < tuple_(moment, saga_id))
        query = query.order_by(c.created_at.desc(), c.id.desc()).limit(limit)
        return [SagaRec(*row) for row in self._rows(query)]

    def version(self, saga_id: str, number: int) -> VersionRec:
        """The version, or the `NotFound` of `records.version`."""
        return _of(VersionRec, records.version(self.session, saga_id, number))

    def steps(self, saga_id: str) -> list[StepRec]:
        c = _table(StepRow).c
        query = sa_select(*_columns(StepRow, StepRec)).where(c.saga_id == saga_id).order_by(c.position)
        return [StepRec(*row) for row in self._rows(query)]

    def latest_approval(self, saga_id: str) -> ApprovalRec | None:
        c = _table(ApprovalRow).c
        query = (
            sa_select(*_columns(ApprovalRow, ApprovalRec))
            .where(c.saga_id == saga_id)
            .order_by(c.issued_at.desc())
            .limit(1)
        )
        rows = self._rows(query)
        return ApprovalRec(*rows[0]) if rows else None

    def artifact_body(self, digest: str) -> dict[str, Any] | None:
        c = _table(ArtifactRow).c
        rows = self._rows(sa_select(c.body).where(c.digest == digest))
        return dict(rows[0][0]) if rows else None

    def role_runs(self, saga_id: str) -> list[RoleRunRec]:
        c = _table(RoleRunRow).c
        query = (
            sa_select(*_columns(RoleRunRow, RoleRunRec)).where(c.saga_id == saga_id).order_by(c.round, c.role)
        )
        return [RoleRunRec(*row) for row in self._rows(query)]

    def spent(self, saga_id: str) -> list[Spent]:
        return [Spent(*row) for row in model_calls.spent_by_role(self.session.connection(), saga_id)]


def status(
    session: Session,
    saga_id: str | None,
    *,
    limit: int | None,
    after: str | None,
    waiting: bool,
    reminder: float | None,
    now: datetime,
) -> dict[str, Any]:
    """`status`: one saga, or a page of sagas (`read_model.status`), read in `session`."""
    reads = SqlSagaReads(session)
    return read_model.status(
        reads, saga_id, limit=limit, after=after, waiting=waiting, reminder=reminder, now=now
    )


def show(session: Session, saga_id: str, number: int | None) -> dict[str, Any]:
    """`show`: a version, default the head (`read_model.show`), read in `session`."""
    return read_model.show(SqlSagaReads(session), saga_id, number)


__all__ = ["SqlSagaReads", "show", "status"]

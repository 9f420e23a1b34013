"""The storage adapter for SQLite (`orchestrator.store.adapter`).

A unit of work takes the database's write lock at `BEGIN IMMEDIATE`, so every
lock a PostgreSQL transaction takes row by row is held already; a write
transaction's statements run one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Column, Table
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

if TYPE_CHECKING:
    from orchestrator.store.adapter import StorageAdapter

T = TypeVar("T")


class SqliteAdapter:
    one_statement_writes = False
    locks_rows = False
    skips_locked = False
    fold_lease_in_final_tx = False
    retries_connect = False
    server_clock = False  # the file is on this host: its clock is the database's

    def __init__(self) -> None:
        self._built: dict[Callable[..., Any], Any] = {}

    def insert(self, table: Table) -> Any:
        return sqlite_insert(table)

    def insert_ignoring(self, table: Table, conflict: Sequence[Column[Any]] | None = None) -> Any:
        return sqlite_insert(table).on_conflict_do_nothing(
            index_elements=list(conflict) if conflict else None
        )

    def built(self, build: Callable[[StorageAdapter], T]) -> T:
        found = self._built.get(build)
        if found is None:
            found = self._built[build] = build(self)
        result: T = found
        return result

    def read_outside_transaction(self, conn: Connection) -> None:
        """SQLite's deferred `BEGIN` is local and costs nothing: nothing to change."""

    def relax_commit(self, session: Session) -> None:
        """WAL mode with `synchronous=NORMAL` waits for no flush at commit already."""

    def lock_schema(self, conn: Connection, key: int) -> None:
        """`BEGIN IMMEDIATE` holds the database's write lock already."""

    def lock_users(self, session: Session) -> None:
        """`BEGIN IMMEDIATE` holds the database's write lock already."""

    def snapshot_reads(self, engine: Engine) -> Engine:
        return engine  # SQLite's BEGIN reads one snapshot

    def clock_engine(self, engine: Engine) -> Engine:
        return engine

    def server_now(self, conn: Connection) -> datetime:
        return datetime.now(UTC)


__all__ = ["SqliteAdapter"]

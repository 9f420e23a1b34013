"""The storage adapter for PostgreSQL (`orchestrator.store.adapter`).

Locks are taken row by row (`FOR UPDATE`, `SKIP LOCKED` for claims), the chains'
functions of migration 0007 take a saga's lock and its heads in one round trip,
and a transaction's writes may go as one statement (writable CTEs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Column, Table, create_engine, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool
from sqlmodel import Session

if TYPE_CHECKING:
    from orchestrator.store.adapter import StorageAdapter

T = TypeVar("T")
_SCHEMA_LOCK = text("SELECT pg_advisory_xact_lock(:k)")
_RELAXED = "SET LOCAL synchronous_commit = off"
_LOCK_USERS = text("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE")
_CLOCK = text("SELECT clock_timestamp()")
CLOCK_CONNECT_TIMEOUT = 3  # seconds (libpq's connect_timeout)


class PostgresAdapter:
    one_statement_writes = True
    locks_rows = True
    skips_locked = True
    fold_lease_in_final_tx = True
    retries_connect = True
    server_clock = True

    def __init__(self) -> None:
        self._built: dict[Callable[..., Any], Any] = {}

    def insert(self, table: Table) -> Any:
        return pg_insert(table)

    def insert_ignoring(self, table: Table, conflict: Sequence[Column[Any]] | None = None) -> Any:
        return pg_insert(table).on_conflict_do_nothing(index_elements=list(conflict) if conflict else None)

    def built(self, build: Callable[[StorageAdapter], T]) -> T:
        found = self._built.get(build)
        if found is None:
            found = self._built[build] = build(self)
        result: T = found
        return result

    def read_outside_transaction(self, conn: Connection) -> None:
        # Autocommit: no `BEGIN` round trip before the statement (the isolation level is
        # put back when the connection returns to the pool).
        conn.execution_options(isolation_level="AUTOCOMMIT")

    def relax_commit(self, session: Session) -> None:
        session.connection().exec_driver_sql(_RELAXED)

    def lock_schema(self, conn: Connection, key: int) -> None:
        conn.execute(_SCHEMA_LOCK, {"k": key})

    def lock_users(self, session: Session) -> None:
        session.execute(_LOCK_USERS)

    def snapshot_reads(self, engine: Engine) -> Engine:
        return engine.execution_options(isolation_level="REPEATABLE READ")

    def clock_engine(self, engine: Engine) -> Engine:
        return create_engine(
            engine.url, poolclass=NullPool, connect_args={"connect_timeout": CLOCK_CONNECT_TIMEOUT}
        )

    def server_now(self, conn: Connection) -> datetime:
        found: datetime = conn.execute(_CLOCK).scalar_one()
        return found.astimezone(UTC)


__all__ = ["PostgresAdapter"]

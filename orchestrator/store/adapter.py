"""The storage adapter: what differs between the two databases, behind one port.

`StorageAdapter` names what callers need (an insert that ignores a conflict, a claim
that skips locked rows, the saga's lock and its chains' heads in one statement, …);
`SqliteAdapter` (`orchestrator.store.sqlite_adapter`) and `PostgresAdapter`
(`orchestrator.store.postgres_adapter`) implement it. `adapter_for` picks one per
database, once: it is the only reader of the dialect's name outside the two adapters.
Statements whose form differs by database are built by a function of the adapter,
once per adapter (`built`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import Column, Table
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

T = TypeVar("T")


class StorageAdapter(Protocol):
    # Several writes of one transaction in one statement (writable CTEs), and the chain
    # functions of migration 0007 that take a saga's lock and its chains' heads with them.
    one_statement_writes: bool
    # A saga's chain is held by locking its row (`FOR UPDATE`); otherwise the unit of work's
    # write lock, taken at `BEGIN`, holds every chain already.
    locks_rows: bool
    # A claim may pass over rows another transaction holds (`FOR UPDATE SKIP LOCKED`).
    skips_locked: bool
    # A short queue's lease may be folded into the handler's final transaction.
    fold_lease_in_final_tx: bool
    # A refused connection is retried for a while (a server restart).
    retries_connect: bool
    # The database keeps time on a server every process asks (`server_now`); otherwise it
    # lives on this host, and this host's clock is the database's.
    server_clock: bool

    def insert(self, table: Table) -> Any:
        """The database's own INSERT of `table` (with its `on_conflict_…` clauses)."""
        ...

    def insert_ignoring(self, table: Table, conflict: Sequence[Column[Any]] | None = None) -> Any:
        """An INSERT of `table` that writes nothing where a row with the same `conflict` columns
        (any unique constraint when None) is there already."""
        ...

    def built(self, build: Callable[[StorageAdapter], T]) -> T:
        """What `build` makes of this adapter, made once and kept."""
        ...

    def read_outside_transaction(self, conn: Connection) -> None:
        """Let `conn` read without a `BEGIN` round trip, where that costs one."""
        ...

    def relax_commit(self, session: Session) -> None:
        """Let this transaction's commit skip the wait for its log flush, where it waits."""
        ...

    def lock_schema(self, conn: Connection, key: int) -> None:
        """Serialize schema upgrades of several processes (the transaction's own lock)."""
        ...

    def lock_users(self, session: Session) -> None:
        """Hold the users table's write lock until the transaction ends."""
        ...

    def snapshot_reads(self, engine: Engine) -> Engine:
        """`engine` reading in one snapshot for a whole transaction."""
        ...

    def clock_engine(self, engine: Engine) -> Engine:
        """An engine of `engine`'s database for asking its time: no pool (it never waits
        for a busy pool), a short connect timeout."""
        ...

    def server_now(self, conn: Connection) -> datetime:
        """The database's time now (not its transaction's start), aware UTC."""
        ...


_ADAPTERS: dict[str, StorageAdapter] = {}


def adapter_for(bind: Engine | Connection | Session) -> StorageAdapter:
    """The adapter of `bind`'s database, one per database (made on first use)."""
    engine_or_conn = bind.get_bind() if isinstance(bind, Session) else bind
    name = engine_or_conn.dialect.name
    found = _ADAPTERS.get(name)
    if found is None:
        found = _ADAPTERS[name] = _make(name)
    return found


def _make(name: str) -> StorageAdapter:
    from orchestrator.store.postgres_adapter import PostgresAdapter
    from orchestrator.store.sqlite_adapter import SqliteAdapter

    adapters: dict[str, Callable[[], StorageAdapter]] = {
        "postgresql": PostgresAdapter,
        "sqlite": SqliteAdapter,
    }
    if name not in adapters:
        raise ValueError(f"no storage adapter for the {name!r} database (SQLite and PostgreSQL have one)")
    return adapters[name]()


__all__ = ["StorageAdapter", "adapter_for"]

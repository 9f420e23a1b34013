"""Engines and units of work.

SQLite (the default) runs in WAL mode with a busy timeout so a relay, workers
and the CLI can share one file; PostgreSQL is used by URL, its connections
given up once silent for `link_timeout` seconds (`pg_link_args`). The schema is
upgraded to the head migration on first use (`orchestrator.store.schema`),
under a lock. A `UnitOfWork` is one transaction; callbacks queued with
`after_commit` run only once it committed (used to hand fresh outbox rows to
the broker straight away, leaving the relay only what was not sent).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import Session, create_engine

from orchestrator.core.config import DEFAULT_LINK_TIMEOUT
from orchestrator.store import outage, schema
from orchestrator.store.adapter import adapter_for
from orchestrator.store.db_clock import forget_database_clocks

# Opens a read session (`bootstrap` hands the use cases one over its engine).
Sessions = Callable[[], Session]

log = logging.getLogger(__name__)
WRITE_OPTION = "pressroom_write"
SCHEMA_LOCK_KEY = 0x70726573  # any constant shared by every Pressroom process
_schema_lock = threading.Lock()
_schema_done: set[str] = set()


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def is_postgres(url: str) -> bool:
    return url.startswith("postgresql")


# Connections a PostgreSQL pool opens beyond its size under load (closed again when returned).
POOL_OVERFLOW = 5


def pg_link_args(url: str, link_timeout: float) -> dict[str, int]:
    """libpq's settings for a connection that goes silent (a partition, a failover, a
    dropped NAT entry), so that no statement waits on it for ever: connecting may take
    `link_timeout` seconds (libpq's least is 2); an idle connection is probed by TCP
    keepalives after that long and dropped after three unanswered probes; and data sent
    that the server has not acknowledged within it (TCP_USER_TIMEOUT) breaks the
    connection. Parameters the URL sets itself are left to it."""
    whole = max(2, math.ceil(link_timeout))
    args = {
        "connect_timeout": whole,
        "keepalives": 1,
        "keepalives_idle": whole,
        "keepalives_interval": max(1, math.ceil(link_timeout / 3)),
        "keepalives_count": 3,
        "tcp_user_timeout": math.ceil(link_timeout * 1000),
    }
    given = make_url(url).query
    return {name: value for name, value in args.items() if name not in given}


def make_engine(
    url: str,
    *,
    upgrade: bool = True,
    connect_retry: float = 3.0,
    pool_size: int = 5,
    link_timeout: float = DEFAULT_LINK_TIMEOUT,
) -> Engine:
    """An engine for `url`, with the schema upgraded on first use (unless `upgrade` is False)."""
    if is_sqlite(url):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Pooled: a fresh connection per session would rerun the pragmas and,
        # closing the last one, checkpoint and delete the WAL every time.
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin_immediate)
    else:
        # No pre-ping (a round trip on every checkout): a connection broken by a
        # server restart fails its one operation, which the lease or the relay retries.
        engine = create_engine(
            url,
            pool_size=pool_size,
            max_overflow=POOL_OVERFLOW,
            pool_recycle=300,
            connect_args=pg_link_args(url, link_timeout),
        )
        outage.retry_connect(engine, connect_retry)
    if upgrade:
        create_schema(engine)
    _engines.append(engine)
    return engine


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # Autocommit at the driver level; SQLAlchemy's "begin" event issues BEGIN.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_begin_immediate(conn: Any) -> None:
    # A unit of work takes the write lock at BEGIN, so two writers never fail
    # on a lock upgrade; plain reads stay deferred and never block on writers.
    if conn.get_execution_options().get(WRITE_OPTION):
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.exec_driver_sql("BEGIN")


_engines: list[Engine] = []


def dispose_all() -> None:
    """Close every pooled connection this process opened, and forget the clocks of its
    databases (tests drop databases)."""
    for engine in _engines:
        engine.dispose()
    _engines.clear()
    forget_database_clocks()


def _after_fork_in_child() -> None:
    # A forked child (Celery prefork) must not share its parent's connections.
    for engine in _engines:
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork_in_child)


def one_read(engine: Engine) -> Connection:
    """A connection for one statement that reads outside any transaction. PostgreSQL: in
    autocommit, so no `BEGIN` round trip precedes the statement (the isolation level is put
    back when the connection returns to the pool); SQLite: its deferred `BEGIN`, which is
    local and costs no more."""
    conn = engine.connect()
    adapter_for(engine).read_outside_transaction(conn)
    return conn


def relaxed_commit(session: Session) -> None:
    """Let this transaction's commit skip the wait for its WAL flush (PostgreSQL).

    Only for bookkeeping whose loss a crash turns into a retry, never into a
    wrong answer: a lease taken (it would run out and be recovered), a row
    marked sent (it would be sent again and deduplicated by the inbox).
    """
    adapter_for(session).relax_commit(session)


def create_schema(engine: Engine) -> schema.Upgrade | None:
    """Upgrade the database to the head migration, once per process and URL;
    what was done, or None when this process had done it already."""
    key = str(engine.url)
    with _schema_lock:
        if key in _schema_done:
            return None
        # Several processes may start at once: serialize the upgrade
        # (PostgreSQL: an advisory lock; SQLite: BEGIN IMMEDIATE).
        with engine.execution_options(**{WRITE_OPTION: True}).begin() as conn:
            adapter_for(engine).lock_schema(conn, SCHEMA_LOCK_KEY)
            done = schema.upgrade(conn)
        _schema_done.add(key)
        return done


_writers: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()


def writer(engine: Engine) -> Engine:
    """`engine` with the write option set (SQLite: `BEGIN IMMEDIATE`), made once per engine
    (every unit of work asks for it; making it costs about 11 µs, reusing it 0.3 µs)."""
    found = _writers.get(engine)
    if found is None:
        found = _writers[engine] = engine.execution_options(**{WRITE_OPTION: True})
    return found


class UnitOfWork:
    """One transaction, plus callbacks that run after it commits."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.session = Session(writer(engine), expire_on_commit=False)
        self._after: list[Callable[[], None]] = []

    def after_commit(self, fn: Callable[[], None]) -> None:
        self._after.append(fn)

    def run_after_commit(self) -> None:
        # The transaction is committed: a failing callback must not undo the
        # caller's success (an unsent outbox row is the relay's to send).
        callbacks, self._after = self._after, []
        for fn in callbacks:
            try:
                fn()
            except Exception:
                log.exception("after-commit callback failed")


@contextmanager
def unit_of_work(engine: Engine) -> Iterator[UnitOfWork]:
    uow = UnitOfWork(engine)
    try:
        yield uow
        uow.session.commit()
    except BaseException:
        uow.session.rollback()
        raise
    finally:
        uow.session.close()
    uow.run_after_commit()


__all__ = [
    "Sessions",
    "POOL_OVERFLOW",
    "UnitOfWork",
    "create_schema",
    "dispose_all",
    "is_postgres",
    "is_sqlite",
    "make_engine",
    "pg_link_args",
    "relaxed_commit",
    "unit_of_work",
    "writer",
]

"""A database that cannot be reached: retried briefly on connect, then named plainly.

`retry_connect(engine, seconds)` makes a refused PostgreSQL connection try
again with backoff (0.1 s doubling to 1 s) for up to `seconds` before it
fails, so a server restart shorter than that costs a command a pause, not an
error. `unreachable(exc)` turns a driver error that means "the service is not
there" into `ServiceUnavailable` (exit 5, HTTP 503), and leaves every other
error alone.

Only connecting is retried: a statement that failed on a connection lost
mid-transaction is not re-run here, because whether its commit took effect
is unknown. The caller reports exit 5 and the person retries; a submit with
`--request-id` then returns the saga it made, if it made one.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from orchestrator.core.errors import ServiceUnavailable
from orchestrator.store.adapter import adapter_for

_SQLITE_UNAVAILABLE = ("unable to open database file", "database is locked", "disk i/o error")


def retry_connect(engine: Engine, seconds: float) -> None:
    if seconds <= 0 or not adapter_for(engine).retries_connect:
        return

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        deadline = time.monotonic() + seconds
        delay = 0.1
        while True:
            try:
                return dialect.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)


def unreachable(exc: BaseException) -> ServiceUnavailable | None:
    """`ServiceUnavailable` when `exc` says the database cannot be reached, else None."""
    if not isinstance(exc, DBAPIError):
        return None
    orig = exc.orig
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0][:200]
    module = type(orig).__module__
    if module.startswith("psycopg"):
        import psycopg

        if not isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError):
            return None
    elif module.startswith("sqlite3"):
        if not any(marker in first.lower() for marker in _SQLITE_UNAVAILABLE):
            return None
    elif not exc.connection_invalidated:
        return None
    return ServiceUnavailable(
        f"the database is unreachable ({first}); nothing was done that was not reported: "
        "retry when it is back (submit --request-id makes a retried submit return the same saga)"
    )


__all__ = ["retry_connect", "unreachable"]

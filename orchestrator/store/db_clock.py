"""The database's clock, as this process reads it: what leases, approval expiry, review
reminders and every other time written by one process and compared by another are
judged on.

`database_clock(engine)` is, for a database with a server of its own (PostgreSQL), an
`AnchoredClock` reading the server's `clock_timestamp()` on a connection of its own (the
storage adapter's `clock_engine`: no pool to wait on), again every `RESAMPLE_EVERY`
seconds, advancing by this host's monotonic clock in between; one per database per
process. For a database on this host (SQLite) it is the system clock. A reading that
fails is logged and tried again `RETRY_AFTER` seconds later; meanwhile the clock goes on
from its last reading (before the first, from the system clock).
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from orchestrator.core.clock import DATABASE_TIME, SYSTEM_CLOCK, AnchoredClock, Clock
from orchestrator.store.adapter import adapter_for

log = logging.getLogger(__name__)

_clocks: dict[str, AnchoredClock] = {}
_engines: list[Engine] = []
_lock = threading.Lock()


def database_clock(engine: Engine) -> Clock:
    """The clock of `engine`'s database (see the module docstring)."""
    adapter = adapter_for(engine)
    if not adapter.server_clock:
        return SYSTEM_CLOCK
    url = engine.url.render_as_string(hide_password=False)
    with _lock:
        found = _clocks.get(url)
        if found is None:
            asker = adapter.clock_engine(engine)
            _engines.append(asker)
            found = _clocks[url] = AnchoredClock(lambda: _read(asker))
        return found


def _read(asker: Engine) -> datetime | None:
    try:
        with asker.connect() as conn:
            return adapter_for(conn).server_now(conn)
    except SQLAlchemyError as exc:
        log.warning("could not read the database's clock (going on from the last reading): %s", exc)
        return None


def forget_database_clocks() -> None:
    """Drop every database clock of this process, and use the system clock until the composition
    root installs another (tests drop their databases)."""
    with _lock:
        for asker in _engines:
            asker.dispose()
        _engines.clear()
        _clocks.clear()
    DATABASE_TIME.use(SYSTEM_CLOCK)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    for clock in _clocks.values():
        clock.forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["database_clock", "forget_database_clocks"]

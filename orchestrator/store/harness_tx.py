"""The harness store's transactions: a call's pinned one (`CallTx`), or the caller's unit of work.

`CallTx` is the store's `HeldTx` (`orchestrator.harness.ports`): the engine hands it
back to the store's writes and never looks inside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine
from sqlmodel import Session

from orchestrator.harness.ports import HeldTx
from orchestrator.store.db import UnitOfWork, unit_of_work, writer


class CallTx:
    """One pooled connection for one call: the authorization reads and the intent
    commit as its first transaction, the result as its second (invariant 4 holds:
    the first commits before the executor runs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.conn = writer(engine).connect()
        self._open: UnitOfWork | None = None

    def unit(self) -> UnitOfWork:
        """The open transaction, or a new one on the same connection."""
        if self._open is None:
            uow = UnitOfWork(self.engine)
            uow.session.close()
            uow.session = Session(bind=self.conn, expire_on_commit=False)
            self._open = uow
        return self._open

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run `fn` once the open transaction commits."""
        self.unit().after_commit(fn)

    def commit(self) -> None:
        uow, self._open = self._open, None
        if uow is not None:
            uow.session.commit()
            uow.session.close()
            uow.run_after_commit()

    def rollback(self) -> None:
        uow, self._open = self._open, None
        if uow is not None:
            uow.session.rollback()
            uow.session.close()

    def release(self) -> None:
        """Roll back whatever was left open (a refusal that wrote nothing) and return the connection."""
        self.rollback()
        self.conn.close()


@contextmanager
def call_unit(engine: Engine, tx: HeldTx | None) -> Iterator[UnitOfWork]:
    """The call's transaction on its pinned connection when given, the caller's unit
    of work when one is given (it commits with the caller), else one of its own."""
    if isinstance(tx, UnitOfWork):
        yield tx
        return
    if not isinstance(tx, CallTx):
        with unit_of_work(engine) as uow:
            yield uow
        return
    uow = tx.unit()
    try:
        yield uow
    except BaseException:
        tx.rollback()
        raise
    tx.commit()


@contextmanager
def joined(engine: Engine, within: HeldTx | None) -> Iterator[UnitOfWork]:
    """The caller's unit of work when given (it commits), else a new one."""
    if within is not None:
        if not isinstance(within, UnitOfWork):
            raise TypeError(f"within must be a UnitOfWork, not {type(within).__name__}")
        yield within
        return
    with unit_of_work(engine) as uow:
        yield uow


__all__ = ["CallTx", "call_unit", "joined"]

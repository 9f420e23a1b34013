"""The `capability_uses` table and its one writer: how often each handle's counted actions ran.

One row per (handle, call): a handle's id is its work's id, so every delivery of
that work, a lease recovery's too, spends the same counts. A row is written in
the transaction that records the call it counts: a write's intent (the saga's
row locked, so two calls of one saga never both take the last use) or a read's
result; the same call again (the same tool and arguments) finds its row and
counts nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Field, SQLModel, select

from orchestrator.core.errors import PolicyRefused
from orchestrator.harness.handles import HandleUse
from orchestrator.store.tables import utcnow


class HandleUseRow(SQLModel, table=True):
    """One counted use of a capability handle's action."""

    __tablename__ = "capability_uses"

    handle_id: str = Field(primary_key=True, description="the handle's id (its work's id)")
    use_key: str = Field(primary_key=True, description="sha256 of the tool and its arguments' digest")
    saga_id: str = Field(index=True)
    action: str
    used_at: datetime = Field(default_factory=utcnow)


class SqlHandleUses:
    """`HandleUses` on the unit of work the intent commits in."""

    def spend(self, tx: Any, use: HandleUse) -> None:
        s = tx.session
        if s.get(HandleUseRow, (use.handle_id, use.key)) is not None:
            return
        used = s.exec(
            select(func.count())
            .select_from(HandleUseRow)
            .where(HandleUseRow.handle_id == use.handle_id, HandleUseRow.action == use.action)
        ).one()
        if used >= use.limit:
            raise PolicyRefused(use.refusal(), handle_id=use.handle_id, action=use.action)
        s.add(HandleUseRow(handle_id=use.handle_id, use_key=use.key, saga_id=use.saga_id, action=use.action))
        s.flush()


__all__ = ["HandleUseRow", "SqlHandleUses"]

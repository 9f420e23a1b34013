"""The `comments` table and its one writer: reviewers' comments on a line of a version.

A comment is kept with the version it is about, keyed by (saga, version, line);
a line may hold several, in the order they were made. Each comment commits with
a `comment` event naming its author, in the caller's unit of work. Comments are
never changed or removed here; whether a version still takes comments (only
while it is the head) is the use case's rule (`orchestrator.comments`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index, Text
from sqlmodel import Field, Session, SQLModel, col, select

from orchestrator.store.events import add_event
from orchestrator.store.tables import new_id, utcnow


class CommentRow(SQLModel, table=True):
    __tablename__ = "comments"
    __table_args__ = (Index("ix_comments_saga_version_line", "saga_id", "version", "line"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    saga_id: str = Field(foreign_key="sagas.id")
    version: int = Field(description="the number of the version commented on")
    line: int = Field(description="1-based line of the version's markdown")
    author: str
    author_id: str | None = Field(default=None, description="a person's principal id; null: open mode")
    text: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


def add_comment(
    session: Session,
    *,
    saga_id: str,
    version: int,
    line: int,
    text: str,
    author: str,
    author_id: str | None,
) -> CommentRow:
    """Record one comment and its `comment` event, in the caller's transaction."""
    row = CommentRow(
        saga_id=saga_id, version=version, line=line, text=text, author=author, author_id=author_id
    )
    session.add(row)
    add_event(
        session,
        saga_id=saga_id,
        actor=author,
        kind="comment",
        status="recorded",
        detail={"comment_id": row.id, "version": version, "line": line, "text": text},
    )
    return row


def comments_on(session: Session, saga_id: str, version: int) -> list[dict[str, Any]]:
    """The comments on one version, by line, then in the order they were made."""
    rows = session.exec(
        select(CommentRow)
        .where(CommentRow.saga_id == saga_id, CommentRow.version == version)
        .order_by(col(CommentRow.line), col(CommentRow.created_at), col(CommentRow.id))
    ).all()
    return [as_dict(r) for r in rows]


def as_dict(row: CommentRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "version": row.version,
        "line": row.line,
        "author": row.author,
        "text": row.text,
        "created_at": row.created_at.isoformat(),
    }


__all__ = ["CommentRow", "add_comment", "as_dict", "comments_on"]

"""Pieces of the standard-library SQLite reader that must agree with SQLAlchemy and Alembic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy.dialects import sqlite

from orchestrator.reads.sqlite_reads import head_revision, sql_datetime
from orchestrator.store import schema


def test_the_head_revision_is_alembics() -> None:
    assert head_revision() == schema.head_revision()


def test_datetimes_bind_as_the_sqlalchemy_sqlite_dialect_binds_them() -> None:
    bind = sqlite.DATETIME().bind_processor(sqlite.dialect())
    assert bind is not None
    for moment in (
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 12, 1, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 6, 1, 12, 0, 0, 5, tzinfo=timezone(timedelta(hours=2))),
        datetime(999, 1, 1),
    ):
        assert sql_datetime(moment) == bind(moment)

"""`status` and `show` straight from a SQLite file or PostgreSQL, when that gives the same answer.

`answer(ask)` tries the quick path: settings from `light_config` (no
pydantic), the database through `sqlite_reads` (the standard library's
sqlite3) or `pg_reads` (psycopg alone): no SQLAlchemy, SQLModel or Alembic;
the shapes from `read_shapes` (the ones the full path uses). It returns None
whenever the quick path is not sure — settings only `Settings()` can judge,
a database that is missing, unreachable at once or not at the head
migration (the full path retries, upgrades or says why), telemetry asked for, closed mode without a valid
token, a saga or version not found, bad flags, any SQLite error — and the
command then runs as before (`reader` + the `Reads` use case), producing the answer
or the error DESIGN.md defines. Both paths only read, so asking the second
after the first gave up changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from orchestrator import light_config
from orchestrator.light_config import ReadSettings
from orchestrator.reads import read_model
from orchestrator.reads.read_model import SagaReads

if TYPE_CHECKING:
    from orchestrator.reads.pg_reads import PgReads
    from orchestrator.reads.sqlite_reads import SqliteReads

Ask = Callable[[SagaReads, ReadSettings], dict[str, Any]]


def answer(ask: Ask) -> dict[str, Any] | None:
    """`ask` on the quick path, or None: the full path must answer (module docstring)."""
    settings = light_config.from_environment()
    if settings is None:
        return None
    try:
        reads = _open(settings)
        if reads is None:
            return None
        with reads:
            read_model.may_read(reads, settings.token)
            return ask(reads, settings)
    except Exception:
        # Unanswered, a refusal or bad input, a locked or odd file: every one of them is the
        # full path's to word (it reads the same rows), so nothing is reported from here.
        return None


def _open(settings: ReadSettings) -> SqliteReads | PgReads | None:
    if settings.sqlite_path is not None:
        from orchestrator.reads.sqlite_reads import SqliteReads

        return SqliteReads.open_at_head(settings.sqlite_path)
    if settings.postgres is not None:
        from orchestrator.reads.pg_reads import PgReads

        return PgReads.open_at_head(settings.postgres)
    return None


def status(
    saga_id: str | None, *, limit: int | None, after: str | None, waiting: bool
) -> dict[str, Any] | None:
    def ask(reads: SagaReads, settings: ReadSettings) -> dict[str, Any]:
        return read_model.status(
            reads,
            saga_id,
            limit=limit,
            after=after,
            waiting=waiting,
            reminder=settings.review_reminder,
            now=datetime.now(UTC),
        )

    return answer(ask)


def show(saga_id: str, number: int | None) -> dict[str, Any] | None:
    return answer(lambda reads, _settings: read_model.show(reads, saga_id, number))


__all__ = ["answer", "show", "status"]

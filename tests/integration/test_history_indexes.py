"""Migration 0015's indexes on PostgreSQL: `alembic upgrade head` (one transaction per
revision) builds each of them with `CREATE INDEX CONCURRENTLY`, every one valid, and
`db check` then finds the database at the head and matching the models."""

from __future__ import annotations

from typing import Any

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine

from orchestrator.store import schema

NAMES = ["ix_sagas_created", "ix_sagas_ready", "ix_sagas_finished", "ix_work_open", "ix_outbox_pending"]


def test_alembic_builds_the_history_indexes_concurrently(pg_url: str) -> None:
    cfg = schema.alembic_config()  # no connection handed over: env.py opens its own
    cfg.set_main_option("sqlalchemy.url", pg_url)
    ours = next(
        rev
        for rev in ScriptDirectory.from_config(cfg).walk_revisions()
        if str(rev.path).endswith("_history_indexes.py")
    )
    assert isinstance(ours.down_revision, str)
    command.upgrade(cfg, ours.down_revision)
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        seen.append(" ".join(statement.split()))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        command.upgrade(cfg, ours.revision)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    built = [s for s in seen if s.upper().startswith("CREATE INDEX")]
    assert len(built) == len(NAMES) and all(s.startswith("CREATE INDEX CONCURRENTLY") for s in built), built

    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            valid = conn.execute(
                text(
                    "SELECT c.relname, i.indisvalid FROM pg_index i "
                    "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ANY(:names)"
                ),
                {"names": NAMES},
            ).all()
            assert dict(valid) == dict.fromkeys(NAMES, True)
            if schema.head_revision() == ours.revision:
                assert schema.differences(conn) == []
    finally:
        engine.dispose()

"""Alembic environment: the target is Pressroom's SQLModel metadata.

Run by `orchestrator.store.schema` on a connection it hands over in
`config.attributes["connection"]` (inside the schema lock, in its transaction), or
by the `alembic` command line (`alembic.ini` at the repository root) against
`PRESSROOM_DATABASE_URL`, one transaction per revision.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from orchestrator.store.schema import target_metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata(),
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
        # With no caller's transaction, one per revision: a revision may then end its own for
        # work that cannot run in one (0015 builds its indexes concurrently on PostgreSQL).
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)  # in the caller's transaction, under its schema lock
else:
    from orchestrator.core.config import Settings

    engine = create_engine(config.get_main_option("sqlalchemy.url") or Settings().database_url)
    with engine.connect() as conn:
        _run(conn)

"""Alembic environment: the target is Pressroom's SQLModel metadata.

Run by `orchestrator.store.schema` on a connection it hands over in
`config.attributes["connection"]` (inside the schema lock), or by the `alembic`
command line (`alembic.ini` at the repository root) against
`PRESSROOM_DATABASE_URL`.
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
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    from orchestrator.core.config import Settings

    engine = create_engine(config.get_main_option("sqlalchemy.url") or Settings().database_url)
    with engine.begin() as conn:
        _run(conn)

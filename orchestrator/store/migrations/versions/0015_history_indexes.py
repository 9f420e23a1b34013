"""indexes that keep history reads flat

A year of finished sagas must not slow what reads the present. Each index
serves one read whose cost would otherwise grow with the history:

| index | serves |
|---|---|
| `ix_sagas_created (created_at, id)` | `status` pages and the web list, newest first, by keyset cursor |
| `ix_sagas_ready (ready_at, id)` where ready-for-review | `status --waiting`, the review queue, the overdue gauge |
| `ix_sagas_finished (updated_at, id)` where succeeded, failed or cancelled | `prune`'s window, batch after batch |
| `ix_work_open (lease_until)` where `done_at` is null | the relay's lease sweep on every idle cycle |
| `ix_outbox_pending (created_at)` where `sent_at` is null | the relay's unsent-row scan on every idle cycle |

On PostgreSQL, when Alembic runs the revision in a transaction of its own
(`alembic upgrade head`, see docs/deploy.md), each index is built with
`CREATE INDEX CONCURRENTLY` in an autocommit block, so writers of a big live
table go on meanwhile. Inside a caller's transaction (`pressroom db upgrade`
and the upgrade on first use, which hold the schema lock in it) an index
cannot be built concurrently, and a plain `CREATE INDEX` blocks the table's
writers while it builds. Nothing existing is dropped (migrations are additive).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FINISHED = "state IN ('succeeded', 'failed', 'cancelled')"
INDEXES: list[tuple[str, str, list[str], str | None]] = [
    ("ix_sagas_created", "sagas", ["created_at", "id"], None),
    ("ix_sagas_ready", "sagas", ["ready_at", "id"], "state = 'ready-for-review'"),
    ("ix_sagas_finished", "sagas", ["updated_at", "id"], FINISHED),
    ("ix_work_open", "work", ["lease_until"], "done_at IS NULL"),
    ("ix_outbox_pending", "outbox", ["created_at"], "sent_at IS NULL"),
]


def _concurrently() -> bool:
    """PostgreSQL, with Alembic owning the transaction (so it may end it for the build)."""
    context = op.get_context()
    return context.dialect.name == "postgresql" and not getattr(context, "_in_external_transaction", True)


def upgrade() -> None:
    if _concurrently():
        with op.get_context().autocommit_block():
            for name, table, columns, where in INDEXES:
                op.create_index(
                    name,
                    table,
                    columns,
                    postgresql_where=sa.text(where) if where else None,
                    postgresql_concurrently=True,
                    if_not_exists=True,
                )
        return
    for name, table, columns, where in INDEXES:
        op.create_index(
            name,
            table,
            columns,
            postgresql_where=sa.text(where) if where else None,
            sqlite_where=sa.text(where) if where else None,
        )


def downgrade() -> None:
    for name, table, _columns, _where in reversed(INDEXES):
        op.drop_index(name, table_name=table)

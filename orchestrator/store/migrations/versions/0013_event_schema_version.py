"""every event's schema version

`events.schema_version`: the event schema an event was written with
(`harness.event_chain`). Its server default, 1, marks every event written
before this revision, and every event a process of an earlier release writes
while a deployment is upgraded (it does not know the column and leaves it
out): version 1's link covers the fields those releases hashed, so all of
them verify as before. This release writes version 2, whose link covers the
version too. Adding a column with a constant default rewrites no row on
PostgreSQL, and on SQLite is one `ALTER TABLE`. Downgrading drops the
column, and with it what made a version-2 event's link check out: an
earlier release's `audit verify` refuses those events.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("schema_version", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_column("schema_version")

"""capability handles: the durable count of each handle's uses

`capability_uses`: one row per (handle, call) of a counted action (a
publisher's `publish` and `publish.compensate`), written in the transaction
that records the call; the same call again finds its row and counts nothing. A process
of an earlier release neither reads nor writes it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 12:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "capability_uses",
        sa.Column("handle_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("use_key", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("saga_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("action", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("used_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("handle_id", "use_key"),
    )
    with op.batch_alter_table("capability_uses", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_capability_uses_saga_id"), ["saga_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("capability_uses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_capability_uses_saga_id"))
    op.drop_table("capability_uses")

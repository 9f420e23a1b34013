"""a cancel asked for while a saga executes

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sagas", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("cancel_requested_by", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("sagas", schema=None) as batch_op:
        batch_op.drop_column("cancel_requested_by")

"""saga budgets

`saga_budgets`: one row per saga, the tool calls, model tokens and cost its
agents have spent, charged in the same transaction as each call's intent.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 12:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "saga_budgets",
        sa.Column("saga_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("saga_id"),
    )


def downgrade() -> None:
    op.drop_table("saga_budgets")

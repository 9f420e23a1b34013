"""declared pipelines: a saga's pipeline and its roles' runs

`sagas.pipeline` (the pipeline's name at submit), `sagas.pipeline_digest`
(the `pipeline` artifact the saga runs; null for sagas from before, which run
the shipped default) and `sagas.prep_round` (the preparation round in
progress). `role_runs`: one row per role per round, its state, a reviewer's
verdict and the artifact the run made.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 17:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sagas", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "pipeline", sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default="default"
            )
        )
        batch_op.add_column(sa.Column("pipeline_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column("prep_round", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "role_runs",
        sa.Column("saga_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("verdict", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("result_digest", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["saga_id"], ["sagas.id"]),
        sa.PrimaryKeyConstraint("saga_id", "round", "role"),
    )


def downgrade() -> None:
    op.drop_table("role_runs")
    with op.batch_alter_table("sagas", schema=None) as batch_op:
        batch_op.drop_column("prep_round")
        batch_op.drop_column("pipeline_digest")
        batch_op.drop_column("pipeline")

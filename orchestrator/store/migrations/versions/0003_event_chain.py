"""events hash-chained per saga

Adds `prev_hash` and `hash` to every event and `UNIQUE (saga_id, prev_hash)`.
Events written before this revision are chained here, in `seq` order per
saga, with the same function the writer uses (`harness.event_chain`), so an
upgraded saga passes `pressroom audit verify` like a new one.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

from orchestrator.harness.checkpoints import GENESIS
from orchestrator.harness.event_chain import HASHED_FIELDS, event_hash

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _backfill() -> None:
    conn = op.get_bind()
    events = sa.table(
        "events",
        sa.column("seq", sa.Integer),
        sa.column("prev_hash", sa.String),
        sa.column("hash", sa.String),
        *(
            sa.column(
                name, sa.JSON if name == "detail" else sa.DateTime if name.endswith("_at") else sa.String
            )
            for name in HASHED_FIELDS
        ),
    )
    heads: dict[Any, str] = {}
    rows = conn.execute(sa.select(events).order_by(events.c.seq)).mappings().all()
    for row in rows:
        fields = dict(row)
        saga_id = fields.get("saga_id")
        prev = GENESIS if saga_id is None else heads.get(saga_id, GENESIS)
        if fields.get("detail") is None:
            fields["detail"] = {}
        digest = event_hash(prev, fields)
        if saga_id is not None:
            heads[saga_id] = digest
        conn.execute(sa.update(events).where(events.c.seq == row["seq"]).values(prev_hash=prev, hash=digest))


def upgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("prev_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column("hash", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    _backfill()
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.alter_column("prev_hash", existing_type=sqlmodel.sql.sqltypes.AutoString(), nullable=False)
        batch_op.alter_column("hash", existing_type=sqlmodel.sql.sqltypes.AutoString(), nullable=False)
        batch_op.create_unique_constraint("uq_events_saga_prev_hash", ["saga_id", "prev_hash"])


def downgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_constraint("uq_events_saga_prev_hash", type_="unique")
        batch_op.drop_column("hash")
        batch_op.drop_column("prev_hash")

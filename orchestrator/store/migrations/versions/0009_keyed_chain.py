"""keyed event links: the cutover from plain SHA-256 links

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 12:00:00

From this revision on, an event's link is keyed (`harness.event_chain.keyed_link`:
sha256 over the previous link, the event's canonical bytes and their HMAC under
the chain key). Events already stored keep their plain links: `chain_marks`
records, as `plain_upto`, the last event `seq` at the upgrade (0 on a new
database). The first application to start with the key signs that row
(`store.chain_keys.use_chain_key`); `audit verify` checks events up to it as
plain and every later one as keyed.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    marks = op.create_table(
        "chain_marks",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("mac", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    last = op.get_bind().execute(sa.text("SELECT coalesce(max(seq), 0) FROM events")).scalar()
    op.bulk_insert(marks, [{"name": "plain_upto", "seq": int(last or 0), "mac": None}])


def downgrade() -> None:
    op.drop_table("chain_marks")

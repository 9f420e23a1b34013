"""the saga's lock with the heads of both its chains, events and checkpoints (PostgreSQL)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 02:00:00

`pressroom_hold_chains(saga)` is `pressroom_hold_chain` (migration 0006) for
a transaction that also writes a checkpoint: it locks the saga's row
(`FOR UPDATE`) and returns `ARRAY[last event's hash, last checkpoint's hash]`
(each NULL when the chain is empty). Both heads are read by statements of
the function run after the lock was granted, with snapshots of their own, so
neither chain can fork. SQLite needs no function (a unit of work there holds
the database's write lock).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HOLD_CHAINS = """
CREATE OR REPLACE FUNCTION pressroom_hold_chains(saga varchar) RETURNS varchar[]
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM sagas WHERE id = saga FOR UPDATE;
    RETURN ARRAY[
        (SELECT hash FROM events WHERE saga_id = saga ORDER BY seq DESC LIMIT 1),
        (SELECT hash FROM checkpoints WHERE saga_id = saga ORDER BY seq DESC LIMIT 1)
    ];
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(HOLD_CHAINS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS pressroom_hold_chains(varchar)")

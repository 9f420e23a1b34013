"""the event chain's lock and head in one round trip (PostgreSQL)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 18:30:00

`pressroom_hold_chain(saga)` locks the saga's row (`FOR UPDATE`) and returns
the hash of its last event. The head is read by a second statement of the
function, which in READ COMMITTED takes a snapshot of its own after the lock
was granted (a VOLATILE function's statements each do), so it sees what the
transaction that held the lock committed: the chain cannot fork. SQLite needs
no function (a unit of work there holds the database's write lock).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HOLD_CHAIN = """
CREATE OR REPLACE FUNCTION pressroom_hold_chain(saga varchar) RETURNS varchar
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM sagas WHERE id = saga FOR UPDATE;
    RETURN (SELECT hash FROM events WHERE saga_id = saga ORDER BY seq DESC LIMIT 1);
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(HOLD_CHAIN)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS pressroom_hold_chain(varchar)")

"""who issued each token, and the token each web session was signed in with

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 10:00:00

`api_tokens.issued_by`: the user id of the admin who issued the token (NULL
for the first user's own token, and for a token a user issued themselves it
is their own id); `created_at` already says when. Tokens issued before this
revision keep NULL: nobody recorded who made them.

`web_sessions.token_id`: the `api_tokens` row a session was signed in with.
A session is honoured only while that token is (`users token NAME` replaces
it and so ends the session). Sessions signed in before this revision have no
token recorded and are no longer honoured: their people sign in again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("issued_by", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_column("token_id")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("issued_by")

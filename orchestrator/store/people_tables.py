"""Tables of people (SQLModel): users, their API tokens, web sessions.

Only hashes of tokens and session ids are stored (sha256 of 256-bit random
values); the clear value is shown once, to the person it was made for.
A user is never deleted: revoking sets `revoked_at`, so their name (and any
name that looks like it) stays taken and past events keep pointing at them.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

from orchestrator.store.tables import new_id, utcnow


class UserRow(SQLModel, table=True):
    __tablename__ = "users"

    id: str = Field(default_factory=new_id, primary_key=True)
    name: str = Field(unique=True, description="normalised: NFKC, casefolded, no invisible characters")
    skeleton: str = Field(unique=True, description="UTS #39 confusable skeleton of the name")
    display: str
    roles: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    active: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    created_by: str | None = None
    revoked_at: datetime | None = None


class TokenRow(SQLModel, table=True):
    __tablename__ = "api_tokens"

    id: str = Field(default_factory=new_id, primary_key=True)
    user_id: str = Field(foreign_key="users.id", index=True)
    token_hash: str = Field(unique=True, description="sha256 hex of the token")
    created_at: datetime = Field(default_factory=utcnow)
    revoked_at: datetime | None = None
    issued_by: str | None = Field(default=None, description="user id of the issuer; null: the first user's")


class WebSessionRow(SQLModel, table=True):
    __tablename__ = "web_sessions"

    id: str = Field(default_factory=new_id, primary_key=True)
    session_hash: str = Field(unique=True, description="sha256 hex of the session id in the cookie")
    user_id: str = Field(foreign_key="users.id", index=True)
    auth: str = Field(default="session", description="session (signed in with a token) or proxy")
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    revoked_at: datetime | None = None
    token_id: str | None = Field(default=None, description="the api_tokens row it was signed in with")


__all__ = ["TokenRow", "UserRow", "WebSessionRow"]

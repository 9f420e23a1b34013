"""The schema's versions: Alembic migrations shipped in `orchestrator/store/migrations/`.

Every process upgrades the database to the head revision on first use, under
the schema lock (`db.create_schema`); `pressroom db upgrade` does the same on
purpose and `pressroom db check` reports, without changing anything, whether
the database is at the head revision and matches the SQLModel tables.

A database made by a release before migrations (tables from `create_all`, no
`alembic_version`) is stamped with the baseline revision, which is exactly
that schema, and then upgraded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, inspect
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import orchestrator.store.budget  # noqa: F401  (saga_budgets)
import orchestrator.store.ops_tables  # noqa: F401  (registers the tables)
import orchestrator.store.outbox_tables  # noqa: F401  (registers the outbox and inbox tables)
import orchestrator.store.people_tables  # noqa: F401  (users, api_tokens, web_sessions)
import orchestrator.store.tables  # noqa: F401

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BASELINE = "0001"


def target_metadata() -> MetaData:
    """Every table Pressroom defines."""
    return SQLModel.metadata


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


@cache
def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations shipped"
    return head


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


@dataclass(frozen=True)
class Upgrade:
    before: str | None
    after: str
    stamped_baseline: bool

    def as_dict(self) -> dict[str, Any]:
        return {"from": self.before, "to": self.after, "stamped_baseline": self.stamped_baseline}


def upgrade(conn: Connection) -> Upgrade:
    """Bring the database on `conn` to the head revision, in the caller's transaction."""
    before = current_revision(conn)
    head = head_revision()
    if before == head:
        return Upgrade(before, head, False)
    cfg = alembic_config(conn)
    stamped = False
    if before is None and inspect(conn).has_table("sagas"):
        # Made by create_all before migrations existed: that schema is the baseline.
        command.stamp(cfg, BASELINE)
        stamped = True
    command.upgrade(cfg, "head")
    return Upgrade(before, head, stamped)


def differences(conn: Connection) -> list[str]:
    """What stands between the database and the models; empty when they agree."""
    found = current_revision(conn)
    head = head_revision()
    if found != head:
        return [
            f"the database is at revision {found or 'none'}, the head is {head}: run pressroom db upgrade"
        ]
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return [_describe(diff) for diff in compare_metadata(context, target_metadata())]


def _describe(diff: Any) -> str:
    # compare_metadata yields tuples, or lists of tuples for column modifications.
    item = diff[0] if isinstance(diff, list) else diff
    kind, *rest = item
    named = []
    for part in rest:
        name = getattr(part, "name", None)
        if name is not None:
            named.append(str(name))
        elif isinstance(part, str):
            named.append(part)
    return f"{kind} {' '.join(named)}".strip()


__all__ = [
    "BASELINE",
    "MIGRATIONS",
    "Upgrade",
    "alembic_config",
    "current_revision",
    "differences",
    "head_revision",
    "target_metadata",
    "upgrade",
]

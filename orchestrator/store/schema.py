"""The schema's versions: Alembic migrations shipped in `orchestrator/store/migrations/`.

Every process upgrades the database to the head revision on first use, under
the schema lock (`db.create_schema`); `pressroom db upgrade` does the same on
purpose and `pressroom db check` reports, without changing anything, whether
the database is at the head revision and matches the SQLModel tables.

A database made by a release before migrations (tables from `create_all`, no
`alembic_version`) is stamped with the baseline revision, which is exactly
that schema, and then upgraded.

A database at a revision these files do not ship was upgraded by a later
release: during a rolling upgrade this release's processes still start, and
run, on it. Migrations are additive (docs/deploy.md, "Rolling upgrades"), so
it is left as it is, with a warning; `db check` still reports it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import MetaData, inspect, text
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

from orchestrator.store.migration_head import shipped_head

if TYPE_CHECKING:
    from alembic.config import Config

import orchestrator.store.budget  # noqa: F401  (saga_budgets)
import orchestrator.store.chain_keys  # noqa: F401  (chain_marks)
import orchestrator.store.comments  # noqa: F401  (comments)
import orchestrator.store.handle_uses  # noqa: F401  (capability_uses)
import orchestrator.store.model_call_rows  # noqa: F401  (model_calls)
import orchestrator.store.ops_tables  # noqa: F401  (registers the tables)
import orchestrator.store.outbox_tables  # noqa: F401  (registers the outbox and inbox tables)
import orchestrator.store.people_tables  # noqa: F401  (users, api_tokens, web_sessions)
import orchestrator.store.tables  # noqa: F401

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BASELINE = "0001"
log = logging.getLogger(__name__)


def target_metadata() -> MetaData:
    """Every table Pressroom defines."""
    return SQLModel.metadata


def alembic_config(connection: Connection | None = None) -> Config:
    # Alembic is loaded only to change or compare the schema: a database already at the
    # head is recognised by one query (`current_revision`) and the files' head.
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


@cache
def head_revision() -> str:
    head = shipped_head()
    if head is None:  # not one plain chain: Alembic reads it
        from alembic.script import ScriptDirectory

        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations shipped"
    return head


def current_revision(conn: Connection) -> str | None:
    """The database's revision: None with no `alembic_version` table (or an empty one)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    if len(rows) > 1:  # several heads: Alembic says what that means
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(conn).get_current_revision()
    return str(rows[0][0]) if rows else None


def shipped(revision: str) -> bool:
    """Whether `revision` is one of the migrations this release ships."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return any(rev.revision == revision for rev in script.walk_revisions())


@dataclass(frozen=True)
class Upgrade:
    before: str | None
    after: str
    stamped_baseline: bool
    ahead: bool = False  # at a later release's revision: left as it is

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "from": self.before,
            "to": self.after,
            "stamped_baseline": self.stamped_baseline,
        }
        if self.ahead:
            out["ahead"] = True
        return out


def upgrade(conn: Connection) -> Upgrade:
    """Bring the database on `conn` to the head revision, in the caller's transaction."""
    before = current_revision(conn)
    head = head_revision()
    if before == head:
        return Upgrade(before, head, False)
    if before is not None and not shipped(before):
        log.warning(
            "the database is at revision %s, a later release's (this one ships up to %s): left as it is",
            before,
            head,
        )
        return Upgrade(before, before, False, ahead=True)
    from alembic import command

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
    if found is not None and found != head and not shipped(found):
        return [f"the database is at revision {found}, a later release's; this release ships up to {head}"]
    if found != head:
        return [
            f"the database is at revision {found or 'none'}, the head is {head}: run pressroom db upgrade"
        ]
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

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
    "shipped",
    "target_metadata",
    "upgrade",
]

"""Operators' commands: `db upgrade`, `db check`, `prune`, `dead-letters`.

Thin, like every command: they read `Settings`, call one function and print
what it returns (`--json`: one object). `prune` and `dead-letters requeue`
name their caller with `--as` the way the other changing commands do.
"""

from __future__ import annotations

from typing import Any

import click

from orchestrator.config import Settings
from orchestrator.errors import Refused


def _emit(payload: dict[str, Any], as_json: bool, line: str) -> None:
    import json

    click.echo(json.dumps(payload, default=str, ensure_ascii=False) if as_json else line)


def register(cli: click.Group, pass_ctx: Any) -> None:
    @cli.group()
    def db() -> None:
        """The database schema: upgrade it to the shipped migrations, or check it."""

    @db.command()
    @click.option("--json", "as_json", is_flag=True)
    def upgrade(as_json: bool) -> None:
        """Upgrade the database to the head revision (also done on first use)."""
        from orchestrator.store.db import create_schema, make_engine

        settings = Settings()
        engine = make_engine(settings.database_url, upgrade=False, connect_retry=settings.connect_retry)
        done = create_schema(engine)
        assert done is not None
        what = "already at" if done.before == done.after else f"upgraded from {done.before or 'empty'} to"
        _emit(done.as_dict(), as_json, f"{what} {done.after}")

    @db.command()
    @click.option("--json", "as_json", is_flag=True)
    def check(as_json: bool) -> None:
        """Exit 4 unless the database is at the head revision and matches the models."""
        from orchestrator.store import schema
        from orchestrator.store.db import make_engine

        settings = Settings()
        engine = make_engine(settings.database_url, upgrade=False, connect_retry=settings.connect_retry)
        with engine.connect() as conn:
            found = schema.differences(conn)
            revision = schema.current_revision(conn)
        if found:
            raise Refused(f"the database does not match the models: {'; '.join(found)}", differences=found)
        _emit(
            {"revision": revision, "head": schema.head_revision(), "differences": []},
            as_json,
            f"ok: at {revision}, matching the models",
        )


__all__ = ["register"]

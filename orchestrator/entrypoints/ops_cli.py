"""Operators' commands: `retry`, `fork`, `takedown`, `db upgrade`, `db check`, `prune`,
`dead-letters`.

Thin, like every command: they read `Settings`, call one function and print
what it returns (`--json`: one object). `prune` and `dead-letters requeue`
name their caller with `--as` the way the other changing commands do.
"""

from __future__ import annotations

import json
from typing import Any

import click

from orchestrator.core.errors import Refused


def _emit(payload: dict[str, Any], as_json: bool, line: str) -> None:
    click.echo(json.dumps(payload, default=str, ensure_ascii=False) if as_json else line)


def register(cli: click.Group, pass_ctx: Any) -> None:
    @cli.group()
    def db() -> None:
        """The database schema: upgrade it to the shipped migrations, or check it."""

    @db.command()
    @click.option("--json", "as_json", is_flag=True)
    def upgrade(as_json: bool) -> None:
        """Upgrade the database to the head revision (also done on first use)."""
        from orchestrator.core.config import Settings
        from orchestrator.store.db import create_schema, make_engine

        settings = Settings()
        engine = make_engine(
            settings.database_url,
            upgrade=False,
            connect_retry=settings.connect_retry,
            link_timeout=settings.link_timeout,
        )
        done = create_schema(engine)
        assert done is not None
        what = "already at" if done.before == done.after else f"upgraded from {done.before or 'empty'} to"
        line = (
            f"at {done.after}, a later release's revision: left as it is"
            if done.ahead
            else f"{what} {done.after}"
        )
        _emit(done.as_dict(), as_json, line)

    @db.command()
    @click.option("--json", "as_json", is_flag=True)
    def check(as_json: bool) -> None:
        """Exit 4 unless the database is at the head revision and matches the models."""
        from orchestrator.core.config import Settings
        from orchestrator.store import schema
        from orchestrator.store.db import make_engine

        settings = Settings()
        engine = make_engine(
            settings.database_url,
            upgrade=False,
            connect_retry=settings.connect_retry,
            link_timeout=settings.link_timeout,
        )
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

    @cli.command()
    @click.option(
        "--older-than", "older_than", required=True, help="e.g. 30d: finished sagas older than this."
    )
    @click.option("--dry-run", is_flag=True, help="Count what would go; remove nothing.")
    @click.option("--as", "actor", default=None, help="Who prunes (open mode; default 'operator').")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def prune(ctx: Any, older_than: str, dry_run: bool, actor: str | None, as_json: bool) -> None:
        """Remove finished sagas' events, checkpoints, ledger, inbox, outbox and work rows."""
        from orchestrator.entrypoints.cli_people import caller

        who = caller(ctx, actor, default="operator")
        out = ctx.app().operations.prune(older_than=older_than, dry_run=dry_run, actor=who)
        verb = "would remove" if dry_run else "removed"
        rows = ", ".join(f"{n} {table}" for table, n in out["rows"].items())
        _emit(out, as_json, f"{verb} {out['total']} rows of {out['sagas']} finished sagas: {rows}")

    @cli.command()
    @click.argument("saga_id")
    @click.option("--as", "actor", default=None, help="Your name (required in open mode).")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def retry(ctx: Any, saga_id: str, actor: str | None, as_json: bool) -> None:
        """Run a failed saga again from its last good point (same keys), or a failed undo again."""
        from orchestrator.entrypoints import render
        from orchestrator.entrypoints.cli_people import caller
        from orchestrator.entrypoints.outcome import check

        out = ctx.app().reviews.retry(saga_id, actor=caller(ctx, actor))
        _emit_status(out, as_json, render.status)
        check(out)

    @cli.command()
    @click.argument("saga_id")
    @click.option(
        "--version", "version", type=int, required=True, help="The version whose bytes the fork holds."
    )
    @click.option("--as", "actor", default=None, help="Your name (required in open mode).")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def fork(ctx: Any, saga_id: str, version: int, actor: str | None, as_json: bool) -> None:
        """Start a new saga at ready-for-review holding one version's bytes."""
        from orchestrator.entrypoints import render
        from orchestrator.entrypoints.cli_people import caller

        out = ctx.app().reviews.fork(saga_id, version=version, actor=caller(ctx, actor))
        origin = out["forked_from"]
        if not as_json:
            click.echo(f"forked {origin['saga_id']} version {origin['version']} into {out['saga_id']}")
        _emit_status(out, as_json, render.status)

    @cli.command()
    @click.argument("saga_id")
    @click.option("--dest", "destination", required=True, help="The destination whose page comes down.")
    @click.option("--reason", required=True, help="Why (kept in the saga's history).")
    @click.option("--as", "actor", default=None, help="Your name (required in open mode).")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def takedown(
        ctx: Any, saga_id: str, destination: str, reason: str, actor: str | None, as_json: bool
    ) -> None:
        """Take one destination's page of a succeeded saga down (its publish undone)."""
        from orchestrator.entrypoints.cli_people import caller

        out = ctx.app().operations.takedown(
            saga_id, destination=destination, reason=reason, actor=caller(ctx, actor)
        )
        _emit(out, as_json, f"took down {destination} of saga {out['saga_id']}: step compensated")

    @cli.group(name="dead-letters", invoke_without_command=True)
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def dead_letters(ctx: Any, as_json: bool) -> None:
        """Messages set aside (unparseable, or failed for good), newest first."""
        if click.get_current_context().invoked_subcommand is not None:
            return
        from orchestrator.entrypoints.cli_people import caller

        out = ctx.app().operations.list_dead_letters(caller(ctx, None, default="operator"))
        lines = [
            f"{d['id']}  {d['created_at']}  {d['task'] or '-'}  saga {d['saga_id'] or '-'}"
            f"{'  requeued' if d['requeued_at'] else ''}  {d['reason']}"
            for d in out["dead_letters"]
        ]
        _emit(out, as_json, "\n".join(lines) or "no dead letters")

    @dead_letters.command()
    @click.argument("dead_id")
    @click.option("--as", "actor", default=None, help="Who requeues (open mode; default 'operator').")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def requeue(ctx: Any, dead_id: str, actor: str | None, as_json: bool) -> None:
        """Send a dead letter again through the outbox."""
        from orchestrator.entrypoints.cli_people import caller

        who = caller(ctx, actor, default="operator")
        out = ctx.app().operations.requeue_dead_letter(dead_id, actor=who)
        _emit(out, as_json, f"requeued {out['id']} as message {out['requeued_as']}")


def _emit_status(out: dict[str, Any], as_json: bool, human: Any) -> None:
    if as_json:
        click.echo(json.dumps(out, default=str, ensure_ascii=False))
    else:
        human(out)


__all__ = ["register"]

"""`pressroom users …` and `pressroom whoami`, and how every command finds its caller.

`caller(ctx, claimed)` is the CLI's side of `orchestrator.people.resolve`:
open mode takes the `--as` name (unverified); closed mode takes the user of
`PRESSROOM_TOKEN`, and a `--as` beside it must name that user.

    users add NAME --role ROLE [--role ROLE ...] [--json]   the new token, shown once
    users list [--json]                                     {"users": [{"name", "roles", "active",
                                                             "added_by", "token": {"issued_by", "issued_at"}}]}
    users revoke NAME                                       tokens and sessions stop at once
    users token NAME [--json]                               a new token; NAME's earlier ones stop
    users roles NAME --role ROLE [--role ROLE ...] [--json] replace NAME's roles
    whoami [--json]                                         {"mode": "open"|"closed", "user": ...}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from orchestrator.entrypoints.lazy import lazy_module

if TYPE_CHECKING:
    from orchestrator import people
    from orchestrator.harness.principals import Principal
else:
    people = lazy_module("orchestrator.people")  # the store: loaded when a command runs, not for --help

ROLE_HELP = "author, reviewer, operator or admin (repeatable)."


def caller(ctx: Any, claimed: str | None, *, default: str | None = None) -> Principal:
    """The principal of this command (see module docstring)."""
    app = ctx.app()
    token = app.settings.token.get_secret_value() if app.settings.token is not None else None
    return people.resolve(app.people, token=token, claimed=claimed, default=default)


def reader(ctx: Any) -> Principal:
    """Read commands: in closed mode any valid token, no role; in open mode anyone."""
    return caller(ctx, None, default="reader")


def _admin_caller(ctx: Any) -> Principal | None:
    """None in open mode (the first user needs no token); the token's user otherwise."""
    app = ctx.app()
    if app.people.is_open():
        return None
    return caller(ctx, None)


def register(cli: click.Group, pass_ctx: Any, emit: Any) -> None:
    @cli.group()
    def users() -> None:
        """People, their roles and their tokens (admin)."""

    @users.command(name="add")
    @click.argument("name")
    @click.option("--role", "roles", multiple=True, required=True, help=ROLE_HELP)
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def add(ctx: Any, name: str, roles: tuple[str, ...], as_json: bool) -> None:
        """Add a user; prints their token once. The first user must hold admin."""
        issued = people.add_user(ctx.app().people, _admin_caller(ctx), name, roles)
        emit(issued.public(), as_json, _show_token)

    @users.command(name="list")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def list_(ctx: Any, as_json: bool) -> None:
        """Every user, with roles and whether they are active."""
        found = people.list_users(ctx.app().people, _admin_caller(ctx))
        emit({"users": [u.listed() for u in found]}, as_json, _show_users)

    @users.command()
    @click.argument("name")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def revoke(ctx: Any, name: str, as_json: bool) -> None:
        """Revoke a user: their tokens and web sessions stop at once."""
        user = people.revoke(ctx.app().people, _admin_caller(ctx), name)
        emit(user.public(), as_json, lambda u: click.echo(f"revoked {u['name']}"))

    @users.command()
    @click.argument("name")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def token(ctx: Any, name: str, as_json: bool) -> None:
        """A new token for NAME (an admin, or NAME themselves); the earlier ones stop working."""
        issued = people.new_token(ctx.app().people, _admin_caller(ctx), name)
        emit(issued.public(), as_json, _show_token)

    @users.command()
    @click.argument("name")
    @click.option("--role", "roles", multiple=True, required=True, help=ROLE_HELP)
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def roles(ctx: Any, name: str, roles: tuple[str, ...], as_json: bool) -> None:
        """Replace NAME's roles; takes effect at once, also for approvals not yet published."""
        user = people.set_roles(ctx.app().people, _admin_caller(ctx), name, roles)
        emit(user.public(), as_json, lambda u: click.echo(f"{u['name']}: {', '.join(u['roles'])}"))

    @cli.command()
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def whoami(ctx: Any, as_json: bool) -> None:
        """The mode (open or closed) and, in closed mode, the user of PRESSROOM_TOKEN."""
        app = ctx.app()
        principal = None if app.people.is_open() else caller(ctx, None)
        emit(people.whoami(app.people, principal), as_json, _show_whoami)


def _show_token(out: dict[str, Any]) -> None:
    click.echo(f"{out['name']} ({', '.join(out['roles'])})")
    click.echo(f"token: {out['token']}")
    click.echo("Shown once: give it to them; they set PRESSROOM_TOKEN to it.")


def _show_users(out: dict[str, Any]) -> None:
    if not out["users"]:
        click.echo("no users: open mode")
    for user in out["users"]:
        state = "active" if user["active"] else "revoked"
        click.echo(f"{user['name']:<24} {state:<8} {', '.join(user['roles'])}")


def _show_whoami(out: dict[str, Any]) -> None:
    if out["user"] is None:
        click.echo("open mode: no users; names given with --as are not verified")
        return
    user = out["user"]
    click.echo(f"closed mode: {user['name']} ({', '.join(user['roles']) or 'no roles'}), by {user['auth']}")


__all__ = ["caller", "reader", "register"]

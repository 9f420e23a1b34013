"""The `pressroom` command: thin commands over the use cases `build_app` assembles.

`main(argv) -> int`; exceptions become exit codes in one place
(`errors.exit_code_for`): 0 ok, 2 bad input, 3 not found, 4 refused,
5 a service unreachable (`store.outage`), 6 the command was carried out but
the work it drove inline ended `failed` or `effect-unknown` (`outcome`:
`approve` says `approved; the publish it started ended STATE: reason`).
`--json` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from orchestrator.core.errors import EXIT_BAD_INPUT, EXIT_UNAVAILABLE, PressroomError, exit_code_for
from orchestrator.entrypoints.cli_people import caller, reader
from orchestrator.entrypoints.lazy import lazy_module
from orchestrator.entrypoints.outcome import check as check_outcome

if TYPE_CHECKING:
    from orchestrator.entrypoints import fast_reads, render
    from orchestrator.pressroom import Pressroom
else:
    # Loaded on first use: `--help` needs neither the database nor the tracing stack.
    render = lazy_module("orchestrator.entrypoints.render")
    fast_reads = lazy_module("orchestrator.entrypoints.fast_reads")


class Ctx:
    def __init__(self) -> None:
        self._app: Pressroom | None = None

    def app(self, service: str = "pressroom-cli") -> Pressroom:
        if self._app is None:
            from orchestrator.bootstrap import build_app
            from orchestrator.core.config import Settings
            from orchestrator.observability import start_tracing

            settings = Settings()
            start_tracing(service, settings)
            self._app = build_app(settings)
        return self._app


pass_ctx = click.make_pass_decorator(Ctx, ensure=True)


def emit(payload: dict[str, Any], as_json: bool, human: Any = None) -> None:
    if as_json:
        click.echo(json.dumps(payload, default=str, ensure_ascii=False))
    elif human is not None:
        human(payload)
    else:
        click.echo(json.dumps(payload, default=str, indent=2, ensure_ascii=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pressroom")
def cli() -> None:
    """Pressroom: briefs in, cited and reviewed documents out, published once per approval.

    \b
    Exit codes: 0 ok, 2 bad input, 3 not found, 4 refused, 5 a service is
    unreachable, 6 done, but the work the command drove ended failed or
    effect-unknown (approve: "approved; the publish it started ended ...").
    """


@cli.command()
@click.option("--brief", required=True, help="What the document should cover.")
@click.option("--corpus", required=True, help="Folder of .md/.txt sources.")
@click.option(
    "--dest",
    "dests",
    multiple=True,
    required=True,
    help="site:PATH, git:PATH, webhook:URL or email:ADDR[,ADDR...] (repeatable).",
)
@click.option("--as", "actor", default=None, help="Who submits (open mode; default 'submitter').")
@click.option("--request-id", default=None, help="Makes a retried submit return the saga the first one made.")
@click.option(
    "--pipeline", default=None, help="The pipeline to run (default: default; `pressroom pipelines list`)."
)
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def submit(
    ctx: Ctx,
    brief: str,
    corpus: str,
    dests: tuple[str, ...],
    actor: str | None,
    request_id: str | None,
    pipeline: str | None,
    as_json: bool,
) -> None:
    """Start a saga: its pipeline's roles research, write and review a brief."""
    who = caller(ctx, actor, default="submitter")
    out = ctx.app().submissions.submit(
        brief=brief,
        corpus=corpus,
        destinations=list(dests),
        actor=who,
        request_id=request_id,
        pipeline=pipeline,
    )
    emit(out, as_json, render.status)
    check_outcome(out)


@cli.command()
@click.argument("saga_id", required=False)
@click.option("--limit", type=int, default=None, help="Sagas per page (default 200, at most 1000).")
@click.option("--after", default=None, help="The `next` cursor of the previous page.")
@click.option(
    "--waiting", is_flag=True, help="Only sagas in ready-for-review past PRESSROOM_REVIEW_REMINDER."
)
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def status(
    ctx: Ctx, saga_id: str | None, limit: int | None, after: str | None, waiting: bool, as_json: bool
) -> None:
    """One saga's state and destinations, or a page of sagas, newest first."""
    out = fast_reads.status(saga_id, limit=limit, after=after, waiting=waiting)
    if out is None:  # not a plain SQLite read: the store's full path
        reader(ctx)
        out = ctx.app().reads.status(saga_id, limit=limit, after=after, waiting=waiting)
    emit(out, as_json, render.status if saga_id else render.saga_list)


@cli.command()
@click.argument("saga_id")
@click.option("--version", "number", type=int, default=None, help="Version number (default: head).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def show(ctx: Ctx, saga_id: str, number: int | None, as_json: bool) -> None:
    """A version with its citations and review report."""
    out = fast_reads.show(saga_id, number)
    if out is None:  # not a plain SQLite read: the store's full path
        reader(ctx)
        out = ctx.app().reads.show(saga_id, number)
    emit(out, as_json, render.version)


@cli.command()
@click.argument("saga_id")
@click.argument("n", type=int)
@click.argument("m", type=int)
@pass_ctx
def diff(ctx: Ctx, saga_id: str, n: int, m: int) -> None:
    """Unified diff between versions N and M."""
    reader(ctx)
    text = ctx.app().reads.diff(saga_id, n, m)
    click.echo(text or f"versions {n} and {m} are identical\n", nl=False)


@cli.command()
@click.argument("saga_id")
@click.option("--version", "number", type=int, required=True, help="The exact version you read.")
@click.option(
    "--as", "actor", default=None, help="Your name (required in open mode; not the version's author)."
)
@click.option("--expires-in", default=None, help="e.g. 30m, 2h, 1d (default 24h).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def approve(
    ctx: Ctx, saga_id: str, number: int, actor: str | None, expires_in: str | None, as_json: bool
) -> None:
    """Approve one exact version for the saga's destinations, once."""
    who = caller(ctx, actor)
    out = ctx.app().reviews.approve(saga_id, version=number, actor=who, expires_in=expires_in)
    emit(out, as_json, render.approval)
    check_outcome(out, approved=True)


@cli.command()
@click.argument("saga_id")
@click.option("--as", "actor", default=None, help="Your name (required in open mode).")
@click.option("--reason", required=True)
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def reject(ctx: Ctx, saga_id: str, actor: str | None, reason: str, as_json: bool) -> None:
    """Send the saga back to the writer with your reason."""
    who = caller(ctx, actor)
    out = ctx.app().reviews.reject(saga_id, actor=who, reason=reason)
    emit(out, as_json, render.status)
    check_outcome(out)


@cli.command()
@click.argument("saga_id")
@click.option("--file", "path", required=True, help="The edited markdown.")
@click.option("--as", "actor", default=None, help="Your name (required in open mode).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def edit(ctx: Ctx, saga_id: str, path: str, actor: str | None, as_json: bool) -> None:
    """Make a new version from a file; earlier approvals are void."""
    who = caller(ctx, actor)
    out = ctx.app().reviews.edit(saga_id, path=path, actor=who)
    emit(out, as_json, render.status)
    check_outcome(out)


@cli.command()
@click.argument("saga_id")
@click.option("--as", "actor", default=None, help="Your name (required in open mode).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def cancel(ctx: Ctx, saga_id: str, actor: str | None, as_json: bool) -> None:
    """Cancel a saga, compensating anything it published."""
    who = caller(ctx, actor)
    out = ctx.app().reviews.cancel(saga_id, actor=who)
    emit(out, as_json, render.status)
    check_outcome(out)


@cli.command()
@click.argument("saga_id")
@click.option("--dest", "destination", required=True)
@click.option("--outcome", type=click.Choice(["confirmed", "absent"]), required=True)
@click.option("--as", "actor", default=None, help="Your name (required in open mode).")
@click.option("--reason", required=True)
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def reconcile(
    ctx: Ctx, saga_id: str, destination: str, outcome: str, actor: str | None, reason: str, as_json: bool
) -> None:
    """Settle an uncertain step: the effect is confirmed, or absent."""
    who = caller(ctx, actor)
    out = ctx.app().reviews.reconcile(
        saga_id, destination=destination, outcome=outcome, actor=who, reason=reason
    )
    emit(out, as_json, render.status)
    check_outcome(out)


@cli.command()
@click.argument("saga_id")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def history(ctx: Ctx, saga_id: str, as_json: bool) -> None:
    """Every event of a saga, with its phase times."""
    reader(ctx)
    emit(ctx.app().reads.history(saga_id), as_json, render.history)


@cli.command()
@click.argument("saga_id")
@click.option("--spans", "span_file", default=None, help="A JSON-lines span file to draw as well.")
@pass_ctx
def trace(ctx: Ctx, saga_id: str, span_file: str | None) -> None:
    """A waterfall of each action's proposal, authorization, send and ack."""
    reader(ctx)
    render.trace(ctx.app().reads.history(saga_id), span_file)


from orchestrator.entrypoints import processes  # noqa: E402  (registers worker, relay, serve, mcp, demo, …)

processes.register(cli, pass_ctx)

from orchestrator.entrypoints import audit_cli  # noqa: E402  (registers `audit verify`)

audit_cli.register(cli, pass_ctx)

from orchestrator.entrypoints import ops_cli  # noqa: E402  (registers db, prune, dead-letters)

ops_cli.register(cli, pass_ctx)

from orchestrator.entrypoints import cli_people  # noqa: E402  (users, whoami)

cli_people.register(cli, pass_ctx, emit)

from orchestrator.entrypoints import indexing  # noqa: E402  (registers index)

indexing.register(cli, pass_ctx, emit)

from orchestrator.entrypoints import pipelines_cli  # noqa: E402  (registers pipelines list / show)

pipelines_cli.register(cli, pass_ctx, emit)


def _error(message: str) -> None:
    """One line on stderr, never wrapped: scripts grep it."""
    sys.stderr.write("error: " + " ".join(message.split()) + "\n")


LONG_RUNNING = frozenset({"worker", "relay", "serve", "mcp", "demo", "eval", "evidence"})


class _CommandLog(logging.Handler):
    """A short command's log records, held until it ends, then one line each on
    stderr; dropped when the command ends with exit 5, whose one line says it all.

    It stays in place after the command: records logged while the process exits (the
    sent-marks still queued are written at exit, `outbox.writer`) follow the same rule,
    instead of reaching Python's last-resort handler as raw lines."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.held: list[str] = []
        self.code: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        line = f"{record.levelname.lower()}: " + " ".join(record.getMessage().split())
        if self.code is None:
            self.held.append(line)
        elif self.code != EXIT_UNAVAILABLE:
            sys.stderr.write(line + "\n")

    def finish(self, code: int) -> None:
        self.code = code
        if code != EXIT_UNAVAILABLE:
            for line in self.held:
                sys.stderr.write(line + "\n")
        self.held = []


def main(argv: Sequence[str] | None = None) -> int:
    args = list(argv) if argv is not None else sys.argv[1:]
    if args and args[0] in LONG_RUNNING:
        return _main(args)
    root = logging.getLogger()
    for earlier in [h for h in root.handlers if isinstance(h, _CommandLog)]:
        root.removeHandler(earlier)  # a command run before this one in the same process
    held = _CommandLog()
    root.addHandler(held)
    code = 1
    try:
        code = _main(args)
    finally:
        held.finish(code)
    return code


def _main(args: list[str]) -> int:
    try:
        # Not standalone, click returns the code of an `Exit` a command raised (`pipelines list`
        # exits 2 after its output when a file does not parse); a command returns None.
        returned = cli.main(args=args, prog_name="pressroom", standalone_mode=False)
        if isinstance(returned, int):
            return returned
    except click.exceptions.Exit as exc:
        return int(exc.exit_code or 0)
    except click.Abort:
        _error("aborted")
        return 1
    except click.UsageError as exc:
        _error(exc.format_message())
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        _error(exc.format_message())
        return exc.exit_code
    except PressroomError as exc:
        _error(str(exc))
        return exit_code_for(exc)
    except Exception as exc:
        # Imported here so that `--help` loads neither pydantic nor the database driver.
        from pydantic import ValidationError

        from orchestrator.store.outage import unreachable

        if isinstance(exc, ValidationError) and exc.title == "Settings":
            first = exc.errors(include_url=False)[0]  # a PRESSROOM_* setting that does not parse
            _error(f"setting PRESSROOM_{str(first['loc'][0]).upper()}: {first['msg']}")
            return EXIT_BAD_INPUT
        down = unreachable(exc)
        if down is None:
            raise
        _error(str(down))
        return exit_code_for(down)
    return 0


def run() -> None:
    sys.exit(main())


__all__ = ["cli", "main", "run"]

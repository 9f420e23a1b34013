"""`pressroom audit verify SAGA_ID [--against FILE] [--json]`: the event chain, state =
reduce(events) and the checkpoint chain of one saga (`orchestrator.audit`); with
`--against`, also that its history up to an exported checkpoint is unchanged.
`pressroom audit export [--output PATH] [--json]`: that checkpoint
(`orchestrator.audit_checkpoint`), on stdout or written to PATH.

Exit 0 when all three hold; exit 4 on any mismatch, the first one named on
stderr (with `--json` the report is printed first: `ok`, `events`,
`checkpoints`, `state`, `problems`); exit 3 for an unknown saga. In closed
mode it needs a valid `PRESSROOM_TOKEN` (any role, like `history`, which
shows the same events); without one, exit 4. A checkpoint file that does
not parse is bad input (exit 2); one signed with another key is refused (exit 4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from orchestrator.core.errors import InvalidInput, Refused


def _human(report: dict[str, Any]) -> None:
    verdict = "ok" if report["ok"] else "MISMATCH"
    click.echo(f"{report['saga_id']}  {verdict}")
    click.echo(
        f"  events       {report['events']['count']:>4}  {'ok' if report['events']['ok'] else 'broken'}"
    )
    click.echo(
        f"  checkpoints  {report['checkpoints']['count']:>4}  {'ok' if report['checkpoints']['ok'] else 'broken'}"
    )
    derived = report["state"].get("derived") or {}
    click.echo(
        f"  state        {derived.get('state', '?'):>4}  {'ok' if report['state']['ok'] else 'differs'}"
    )
    for problem in report["problems"]:
        click.echo(f"  - {problem}")


def register(cli: click.Group, pass_ctx: Any) -> None:
    @cli.group()
    def audit() -> None:
        """Check a saga's record: its events, state and checkpoints."""

    @audit.command()
    @click.argument("saga_id")
    @click.option("--against", "against_file", default=None, help="a checkpoint from `audit export`")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def verify(ctx: Any, saga_id: str, against_file: str | None, as_json: bool) -> None:
        """Recompute the event chain, state = reduce(events) and the checkpoint chain; exit 4 on a mismatch."""
        from orchestrator import audit as auditing
        from orchestrator.entrypoints.cli_people import reader

        reader(ctx)  # closed mode: a valid token (any role), as for history; exit 4 without one
        engine = ctx.app().engine
        against = None if against_file is None else _checkpoint(engine, against_file)
        report = auditing.verify(engine, saga_id, against=against)
        if as_json:
            click.echo(json.dumps(report, default=str, ensure_ascii=False))
        else:
            _human(report)
        if not report["ok"]:
            raise Refused(f"saga {report['saga_id']} fails its audit: {report['problems'][0]}")

    @audit.command()
    @click.option("--output", "output", default=None, help="write the checkpoint to this file")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def export(ctx: Any, output: str | None, as_json: bool) -> None:
        """A signed checkpoint of every saga's chain head, to keep elsewhere for `verify --against`."""
        from orchestrator import audit_checkpoint
        from orchestrator.entrypoints.cli_people import reader

        reader(ctx)
        checkpoint = audit_checkpoint.export(ctx.app().engine)
        text = json.dumps(checkpoint, ensure_ascii=False, indent=1)
        if output is None:
            click.echo(json.dumps(checkpoint, ensure_ascii=False) if as_json else text)
            return
        try:
            Path(output).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"cannot write {output}: {exc.strerror or exc}") from None
        summary = {
            "path": output,
            "created_at": checkpoint["created_at"],
            "events": checkpoint["events"],
            "sagas": len(checkpoint["sagas"]),
        }
        if as_json:
            click.echo(json.dumps(summary))
        else:
            click.echo(
                f"checkpoint of {summary['sagas']} sagas, {summary['events']} events written to {output}"
            )


def _checkpoint(engine: Any, path: str) -> Any:
    from orchestrator import audit_checkpoint
    from orchestrator.store.chain_keys import key_of

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"cannot read the checkpoint {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    return audit_checkpoint.parse(text, key_of(engine), where=f"the checkpoint {path}")


__all__ = ["register"]

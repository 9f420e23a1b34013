"""`pressroom audit verify SAGA_ID [--json]`: the event chain, state = reduce(events)
and the checkpoint chain of one saga (`orchestrator.audit`).

Exit 0 when all three hold; exit 4 on any mismatch, the first one named on
stderr (with `--json` the report is printed first: `ok`, `events`,
`checkpoints`, `state`, `problems`); exit 3 for an unknown saga.
"""

from __future__ import annotations

import json
from typing import Any

import click

from orchestrator.core.errors import Refused


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
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def verify(ctx: Any, saga_id: str, as_json: bool) -> None:
        """Recompute the event chain, state = reduce(events) and the checkpoint chain; exit 4 on a mismatch."""
        from orchestrator import audit as auditing

        report = auditing.verify(ctx.app().engine, saga_id)
        if as_json:
            click.echo(json.dumps(report, default=str, ensure_ascii=False))
        else:
            _human(report)
        if not report["ok"]:
            raise Refused(f"saga {report['saga_id']} fails its audit: {report['problems'][0]}")


__all__ = ["register"]

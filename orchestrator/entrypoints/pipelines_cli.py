"""`pressroom pipelines list` and `pressroom pipelines show NAME`: what a submit may run.

    pipelines list [--json]        {"pipelines": [{"name", "description", "file", "roles": [...]}],
                                    "invalid": [{"name", "file", "error"}]}
    pipelines show NAME [--json]   the roles in order, each with kind, after, planner, model,
                                    budget and tools; the model profiles by name (never a key)

Reading them needs what reading sagas needs: anyone in open mode, a valid
token in closed mode. `list` lists every pipeline that parses even when a
file beside it does not; each file that does not is then named on stderr,
one line with the file and the field, and the command exits 2, so a check in
CI fails while a person still sees the good ones. `show` of such a file
prints that line and exits 2; of a name with no file, exit 3; a name that is
not one (`../x`, upper case), exit 2. The shapes are
`orchestrator.pipeline_catalog`'s, as the HTTP API and MCP give them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from orchestrator.entrypoints.cli_people import reader
from orchestrator.entrypoints.lazy import lazy_module

if TYPE_CHECKING:
    from orchestrator import pipeline_catalog
    from orchestrator.entrypoints import render
else:
    pipeline_catalog = lazy_module("orchestrator.pipeline_catalog")  # loads pydantic: on use only
    render = lazy_module("orchestrator.entrypoints.render")

EXIT_BAD_FILE = 2


def _budget_text(budget: dict[str, Any] | None) -> str:
    if not budget:
        return ""
    parts = []
    if budget.get("tokens") is not None:
        parts.append(f"{budget['tokens']:,} tokens")
    if budget.get("cost_usd") is not None:
        parts.append(f"${budget['cost_usd']}")
    return ", ".join(parts)


def human_list(out: dict[str, Any]) -> None:
    pipelines = out["pipelines"]
    if render.piped():
        for p in pipelines:
            render.line(p["name"], " → ".join(p["roles"]), p.get("description") or "")
        return
    from rich.table import Table

    table = Table("pipeline", "roles", "description", box=None, pad_edge=False)
    for p in pipelines:
        table.add_row(
            render.escape(p["name"]),
            render.escape(" → ".join(p["roles"])),
            render.escape(p.get("description") or ""),
        )
    render.console().print(table)


def human_show(out: dict[str, Any]) -> None:
    render.line(f"{out['name']}  {out.get('description') or ''}".rstrip())
    if out.get("file"):
        render.line(f"  file: {out['file']}")
    rows = [
        (
            r["name"],
            r["kind"],
            ", ".join(r["after"]),
            r["planner"],
            r.get("model") or "",
            _budget_text(r.get("budget")),
            ", ".join(r["tools"]),
        )
        for r in out["roles"]
    ]
    if render.piped():
        labels = ("", "", "after ", "planner ", "model ", "budget ", "tools ")
        for row in rows:
            render.line("   ", *(label + cell for label, cell in zip(labels, row, strict=True) if cell))
    else:
        from rich.table import Table

        # Names are never cut; `after` and `tools` fold. The model is listed below with its
        # profile (the planner column names the profile), which keeps the table in 80 columns.
        table = Table(box=None, pad_edge=False)
        for header in ("  role", "kind", "after", "planner", "budget", "tools"):
            table.add_column(header, no_wrap=header not in ("after", "tools"), overflow="fold")
        for name, kind, after, planner, _model, budget, tools in rows:
            table.add_row(
                *(render.escape(cell) for cell in ("  " + name, kind, after, planner, budget, tools))
            )
        render.console().print(table)
    for m in out.get("models", []):
        where = f" at {m['base_url']}" if m.get("base_url") else ""
        render.line(f"  model profile {m['name']}: {m['model']}{where}")
    if out.get("mcp"):
        render.line(f"  mcp servers: {', '.join(out['mcp'])}")
    if out.get("budget"):
        render.line(f"  budget per saga: {_budget_text(out['budget'])}")


def register(cli: click.Group, pass_ctx: Any, emit: Any) -> None:
    @cli.group()
    def pipelines() -> None:
        """The pipelines a submit may run (PRESSROOM_PIPELINES_DIR, then the shipped ones)."""

    @pipelines.command(name="list")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def list_(ctx: Any, as_json: bool) -> None:
        """Every pipeline and its roles; a file that does not parse is named on stderr (exit 2)."""
        reader(ctx)
        out = pipeline_catalog.listing(ctx.app().settings)
        emit(out, as_json, human_list)
        for bad in out["invalid"]:
            click.echo("error: " + " ".join(bad["error"].split()), err=True)
        if out["invalid"]:
            raise click.exceptions.Exit(EXIT_BAD_FILE)

    @pipelines.command(name="show")
    @click.argument("name")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def show(ctx: Any, name: str, as_json: bool) -> None:
        """A pipeline's roles in order: kind, after, planner, model, budget, tools."""
        reader(ctx)
        emit(pipeline_catalog.detail(ctx.app().settings, name), as_json, human_show)


__all__ = ["human_list", "human_show", "register"]

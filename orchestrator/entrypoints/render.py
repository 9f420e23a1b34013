"""Human-readable output for the CLI (the `--json` forms are the contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

out = Console(highlight=False)


def status(s: dict[str, Any]) -> None:
    out.print(
        f"[bold]{s['saga_id']}[/bold]  [cyan]{s['state']}[/cyan]  v{s['version']}  {(s.get('version_digest') or '')[:12]}"
    )
    if s.get("title"):
        out.print(f"  {s['title']}")
    if s.get("reason"):
        out.print(f"  reason: {s['reason']}", markup=False)
    table = Table("destination", "state", "receipt", box=None, pad_edge=False)
    for d in s.get("destinations", []):
        receipt = d.get("receipt") or {}
        shown = receipt.get("commit") or receipt.get("path") or (str(receipt)[:60] if receipt else "")
        table.add_row(d["uri"], d["state"], str(shown))
    out.print(table)


def saga_list(payload: dict[str, Any]) -> None:
    table = Table("saga", "state", "v", "title", "updated", box=None, pad_edge=False)
    for s in payload["sagas"]:
        table.add_row(
            s["saga_id"], s["state"], str(s["version"]), s.get("title") or "", s.get("updated_at") or ""
        )
    out.print(table)
    if payload.get("next"):
        out.print(f"more: --after {payload['next']}", markup=False)


def version(v: dict[str, Any]) -> None:
    out.print(f"[bold]v{v['version']}[/bold] {v['version_digest']}  by {v['author']}")
    out.print(Markdown(v["markdown"]))
    if v.get("citations"):
        table = Table("marker", "source", "quote", box=None, pad_edge=False)
        for c in v["citations"]:
            table.add_row(c.get("marker", ""), c.get("source", ""), (c.get("quote") or "")[:80])
        out.print(table)
    review = v.get("review") or {}
    if review:
        out.print(
            f"review: [bold]{review.get('verdict')}[/bold] ({len(review.get('findings', []))} findings)"
        )
        for f in review.get("findings", []):
            out.print(f"  - {f.get('rule')} at {f.get('location')}: {f.get('message')}", markup=False)
    for s in v.get("suspicious_sources", []):
        out.print(f"[yellow]flagged source[/yellow] {s['source']}: {', '.join(s['reasons'])}", markup=False)


def approval(a: dict[str, Any]) -> None:
    out.print(
        f"approved v{a['version']} ({a['version_digest'][:12]}) of {a['saga_id']} by {a['approver']}, "
        f"expires {a['expires_at']}; approval {a['approval_id']}"
    )


def history(h: dict[str, Any]) -> None:
    table = Table("time", "actor", "kind", "tool", "status", "detail", box=None, pad_edge=False)
    for e in h["events"]:
        detail = e.get("detail") or {}
        note = detail.get("reason") or detail.get("to") or detail.get("key") or ""
        table.add_row(
            (e["created_at"] or "")[11:23],
            e["actor"],
            e["kind"],
            e.get("tool") or "",
            e["status"],
            str(note)[:70],
        )
    out.print(table)


def trace(h: dict[str, Any], span_file: str | None) -> None:
    from telemetry.render import read_span_file, render_waterfall

    spans = read_span_file(Path(span_file)) if span_file else None
    # A waterfall needs room: never narrower than 120 columns, even in a pipe.
    wide = Console(highlight=False, width=max(out.width, 120))
    render_waterfall(h["events"], spans, console=wide)


__all__ = ["approval", "history", "saga_list", "status", "trace", "version"]

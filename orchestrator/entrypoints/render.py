"""Human-readable output for the CLI (the `--json` forms are the contract).

On a terminal, tables fit its width and ids are never cut; piped, every
record is one plain line (tab-free, two spaces apart) and nothing is
hard-wrapped, so a path or an id can be copied or grepped whole. Text that
came from documents, sources or people is escaped, never read as markup.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

out = Console(highlight=False)
out.soft_wrap = not out.is_terminal  # piped: never hard-wrap at 80 columns


def _piped() -> bool:
    return not out.is_terminal


def _line(*cells: object) -> None:
    """One record on one line, markup-free and never wrapped."""
    out.print("  ".join(str(c) for c in cells).rstrip(), markup=False, soft_wrap=True)


def plural(count: int, noun: str) -> str:
    """`1 finding`, `2 findings`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def receipt_text(receipt: object) -> str:
    """A receipt as it is best read: a site path, a git commit, else compact JSON."""
    if not receipt:
        return ""
    if isinstance(receipt, dict):
        for key in ("commit", "path"):
            if receipt.get(key):
                return str(receipt[key])
    return json.dumps(receipt, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def status(s: dict[str, Any]) -> None:
    digest = (s.get("version_digest") or "")[:12]
    out.print(
        f"[bold]{escape(s['saga_id'])}[/bold]  [cyan]{escape(s['state'])}[/cyan]  v{s['version']}  {digest}",
        soft_wrap=True,
    )
    if s.get("title"):
        _line(f"  {s['title']}")
    if s.get("reason"):
        _line(f"  reason: {s['reason']}")
    if s.get("cancel_requested_by") and s["state"] == "executing":
        _line(f"  cancel requested by {s['cancel_requested_by']}: stops before its next step, then undoes")
    review = s.get("review") or {}
    if review:
        findings = review.get("findings", [])
        _line(f"  review: {review.get('verdict')} ({plural(len(findings), 'finding')})")
        for f in findings:
            _line(f"    - {f.get('rule')} at {f.get('location')}: {f.get('message')}")
    destinations = s.get("destinations", [])
    if _piped():
        for d in destinations:
            _line(d["uri"], d["state"], receipt_text(d.get("receipt")))
        return
    table = Table("destination", "state", "receipt", box=None, pad_edge=False)
    for d in destinations:
        table.add_row(escape(d["uri"]), escape(d["state"]), escape(receipt_text(d.get("receipt"))))
    out.print(table)


def saga_list(payload: dict[str, Any]) -> None:
    sagas = payload["sagas"]
    if _piped():
        for s in sagas:
            _line(
                s["saga_id"], s["state"], f"v{s['version']}", s.get("updated_at") or "", s.get("title") or ""
            )
        return
    table = Table(box=None, pad_edge=False)
    # The id is the value people copy: it never wraps or shrinks; the title gives way first.
    table.add_column("saga", no_wrap=True, min_width=max((len(s["saga_id"]) for s in sagas), default=4))
    table.add_column("state", no_wrap=True)
    table.add_column("v", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("title", overflow="ellipsis", no_wrap=True, ratio=1)
    for s in sagas:
        table.add_row(
            s["saga_id"],
            s["state"],
            str(s["version"]),
            s.get("updated_at") or "",
            escape(s.get("title") or ""),
        )
    out.print(table)
    if payload.get("next"):
        out.print(f"more: --after {payload['next']}", markup=False)


def version(v: dict[str, Any]) -> None:
    out.print(
        f"[bold]v{v['version']}[/bold] {v['version_digest']}  by {escape(str(v['author']))}", soft_wrap=True
    )
    if _piped():
        out.print(
            v["markdown"], markup=False, soft_wrap=True, end="" if v["markdown"].endswith("\n") else "\n"
        )
    else:
        from rich.markdown import Markdown

        out.print(Markdown(v["markdown"]))
    citations = v.get("citations") or []
    if citations and _piped():
        for c in citations:
            _line(c.get("marker", ""), c.get("source", ""), " ".join((c.get("quote") or "").split()))
    elif citations:
        table = Table("marker", "source", "quote", box=None, pad_edge=False)
        for c in citations:
            table.add_row(
                escape(c.get("marker", "")), escape(c.get("source", "")), escape((c.get("quote") or "")[:80])
            )
        out.print(table)
    review = v.get("review") or {}
    if review:
        findings = review.get("findings", [])
        out.print(
            f"review: [bold]{escape(str(review.get('verdict')))}[/bold] ({plural(len(findings), 'finding')})",
            soft_wrap=True,
        )
        for f in findings:
            _line(f"  - {f.get('rule')} at {f.get('location')}: {f.get('message')}")
    for s in v.get("suspicious_sources", []):
        out.print(
            f"[yellow]flagged source[/yellow] {escape(s['source'])}: {escape(', '.join(s['reasons']))}",
            soft_wrap=True,
        )


def approval(a: dict[str, Any]) -> None:
    _line(
        f"approved v{a['version']} ({a['version_digest'][:12]}) of {a['saga_id']} by {a['approver']}, "
        f"expires {a['expires_at']}; approval {a['approval_id']}"
    )
    if a.get("state"):
        _line(f"saga is now {a['state']}" + (f": {a['reason']}" if a.get("reason") else ""))


def history(h: dict[str, Any]) -> None:
    rows = []
    for e in h["events"]:
        detail = e.get("detail") or {}
        note = detail.get("reason") or detail.get("to") or detail.get("key") or ""
        rows.append(
            ((e["created_at"] or "")[11:23], e["actor"], e["kind"], e.get("tool") or "", e["status"], note)
        )
    if _piped():
        for row in rows:
            _line(*row)
        return
    table = Table("time", "actor", "kind", "tool", "status", "detail", box=None, pad_edge=False)
    for row in rows:
        table.add_row(*(escape(str(cell)) for cell in row[:5]), escape(str(row[5])[:70]))
    out.print(table)


def trace(h: dict[str, Any], span_file: str | None) -> None:
    from telemetry.render import read_span_file, render_waterfall, spans_for_saga

    spans = spans_for_saga(read_span_file(Path(span_file)), h["saga_id"]) if span_file else None
    # A waterfall needs room: never narrower than 120 columns, even in a pipe.
    wide = Console(highlight=False, width=max(out.width, 120))
    render_waterfall(h["events"], spans, console=wide)


__all__ = ["approval", "history", "plural", "receipt_text", "saga_list", "status", "trace", "version"]

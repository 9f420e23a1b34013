"""Human-readable output for the CLI (the `--json` forms are the contract).

On a terminal (rich), tables fit its width and ids are never cut; piped,
every record is one plain line (tab-free, two spaces apart) and nothing is
hard-wrapped, so a path or an id can be copied or grepped whole. Text that
came from documents, sources or people is escaped, never read as markup.

Piped output is written without rich, which is imported only for a
terminal: a piped `pressroom status` starts without it. Piped text is
printed as typed, as rich printed it piped: the control codes rich drops
(BEL, BS, VT, FF, CR) are dropped, tabs are expanded to 8 columns; no
`:name:` is read as an emoji code.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_DROPPED = {code: None for code in (7, 8, 11, 12, 13)}


@cache
def console() -> Console:
    """The rich console of a terminal (and of `trace`), made on first use."""
    from rich.console import Console

    made = Console(highlight=False)
    made.soft_wrap = not made.is_terminal  # piped: never hard-wrap at 80 columns
    return made


def _piped() -> bool:
    isatty = getattr(sys.stdout, "isatty", None)
    try:
        return not (isatty is not None and isatty())
    except ValueError:  # a closed stream
        return True


def _write(text: str, end: str = "\n") -> None:
    """Piped: `text` as typed, one plain record."""
    sys.stdout.write(text.translate(_DROPPED).expandtabs(8) + end)


def _line(*cells: object) -> None:
    """One record on one line, markup-free and never wrapped."""
    text = "  ".join(str(c) for c in cells).rstrip()
    if _piped():
        _write(text)
    else:
        console().print(text, markup=False, soft_wrap=True)


def line(*cells: object) -> None:
    """One record on one line (public: the other command modules print with it)."""
    _line(*cells)


def piped() -> bool:
    """Whether stdout is not a terminal: plain lines then, no rich."""
    return _piped()


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


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
    if _piped():
        _write(f"{s['saga_id']}  {s['state']}  v{s['version']}  {digest}")
    else:
        console().print(
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
    progress(s)
    destinations = s.get("destinations", [])
    if _piped():
        for d in destinations:
            _line(d["uri"], d["state"], receipt_text(d.get("receipt")))
        return
    from rich.table import Table

    table = Table("destination", "state", "receipt", box=None, pad_edge=False)
    for d in destinations:
        table.add_row(escape(d["uri"]), escape(d["state"]), escape(receipt_text(d.get("receipt"))))
    console().print(table)


def usage_text(usage: dict[str, Any]) -> str:
    """`2 model calls, 1,200 tokens in, 300 out, $0.0012`."""
    return (
        f"{plural(int(usage.get('model_calls') or 0), 'model call')}, "
        f"{int(usage.get('tokens_in') or 0):,} tokens in, {int(usage.get('tokens_out') or 0):,} out, "
        f"${float(usage.get('cost_usd') or 0):.4f}"
    )


def progress(s: dict[str, Any]) -> None:
    """The saga's pipeline, each role's latest run (a reviewer's verdict) and the model usage."""
    if not s.get("pipeline"):
        return
    _line(f"  pipeline: {s['pipeline']}  usage: {usage_text(s.get('usage') or {})}")
    roles = s.get("roles") or []
    if _piped():
        for r in roles:
            _line("   ", r["name"], r["kind"], r["state"], r.get("verdict") or "", r.get("reason") or "")
        return
    from rich.table import Table

    table = Table("  role", "kind", "state", "verdict", "model use", box=None, pad_edge=False)
    for r in roles:
        spent = r.get("usage") or {}
        use = usage_text(spent) if spent.get("model_calls") else ""
        table.add_row(
            "  " + escape(r["name"]),
            escape(r["kind"]),
            escape(r["state"]),
            escape(r.get("verdict") or ""),
            use,
        )
    console().print(table)


def saga_list(payload: dict[str, Any]) -> None:
    sagas = payload["sagas"]
    if _piped():
        for s in sagas:
            _line(
                s["saga_id"], s["state"], f"v{s['version']}", s.get("updated_at") or "", s.get("title") or ""
            )
        return
    from rich.table import Table

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
    out = console()
    out.print(table)
    if payload.get("next"):
        out.print(f"more: --after {payload['next']}", markup=False)


def version(v: dict[str, Any]) -> None:
    citations = v.get("citations") or []
    review = v.get("review") or {}
    findings = review.get("findings", [])
    if _piped():
        _write(f"v{v['version']} {v['version_digest']}  by {v['author']}")
        _write(v["markdown"], end="" if v["markdown"].endswith("\n") else "\n")
        for c in citations:
            _line(c.get("marker", ""), c.get("source", ""), " ".join((c.get("quote") or "").split()))
        if review:
            _write(f"review: {review.get('verdict')} ({plural(len(findings), 'finding')})")
        for f in findings if review else []:
            _line(f"  - {f.get('rule')} at {f.get('location')}: {f.get('message')}")
        for s in v.get("suspicious_sources", []):
            _write(f"flagged source {s['source']}: {', '.join(s['reasons'])}")
        progress(v)
        return
    from rich.markdown import Markdown
    from rich.table import Table

    out = console()
    out.print(
        f"[bold]v{v['version']}[/bold] {v['version_digest']}  by {escape(str(v['author']))}", soft_wrap=True
    )
    out.print(Markdown(v["markdown"]))
    if citations:
        table = Table("marker", "source", "quote", box=None, pad_edge=False)
        for c in citations:
            table.add_row(
                escape(c.get("marker", "")), escape(c.get("source", "")), escape((c.get("quote") or "")[:80])
            )
        out.print(table)
    if review:
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
    progress(v)


def approval(a: dict[str, Any]) -> None:
    _line(
        f"approved v{a['version']} ({a['version_digest'][:12]}) of {a['saga_id']} by {a['approver']}, "
        f"expires {a['expires_at']}; approval {a['approval_id']}"
    )
    if a.get("state"):
        _line(f"saga is now {a['state']}" + (f": {a['reason']}" if a.get("reason") else ""))


PHASES = (
    ("proposed_at", "proposed"),
    ("authorized_at", "authorized"),
    ("sent_at", "sent"),
    ("acked_at", "acked"),
)


def duration(seconds: float) -> str:
    """`0.3ms`, `203.9ms`, `2.41s`, `3m05s`, `2h07m`; signed when a clock ran backwards."""
    sign, seconds = ("-", -seconds) if seconds < 0 else ("+", seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.1f}ms"
    if seconds < 60:
        return f"{sign}{seconds:.2f}s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes}m{rest:02d}s"
    return f"{sign}{minutes // 60}h{minutes % 60:02d}m"


def phase_text(event: dict[str, Any]) -> str:
    """An action's phases: the first one's clock time, then each next one's time after the one
    before, e.g. `proposed 13:42:18.579, authorized +0.3ms, sent +0.1ms, acked +203.9ms`.
    Phases an event does not have (a refused call is never sent) are left out."""
    from datetime import datetime

    times = [(label, datetime.fromisoformat(event[key])) for key, label in PHASES if event.get(key)]
    if not times:
        return ""
    (label, first), parts = times[0], []
    parts.append(f"{label} {first.strftime('%H:%M:%S.%f')[:12]}")
    before = first
    for label, moment in times[1:]:
        parts.append(f"{label} {duration((moment - before).total_seconds())}")
        before = moment
    return ", ".join(parts)


def _flat(value: object) -> str:
    """A cell on one line: text a person or a tool wrote may hold newlines, and control
    characters (a terminal escape sequence) are dropped, never sent to the terminal."""
    return "".join(ch for ch in " ".join(str(value).split()) if ch.isprintable())


def history(h: dict[str, Any]) -> None:
    """One line per event: time, actor, kind, tool, status, its detail, and its phase times."""
    rows = []
    for e in h["events"]:
        detail = e.get("detail") or {}
        note = detail.get("reason") or detail.get("to") or detail.get("key") or ""
        rows.append(
            (
                (e["created_at"] or "")[11:23],
                _flat(e["actor"]),
                e["kind"],
                e.get("tool") or "",
                e["status"],
                _flat(note),
                phase_text(e),
            )
        )
    if _piped():
        for row in rows:
            _line(*row)
        return
    # A terminal: the columns aligned, and an action's phases on an indented line of their own
    # below it, so that they are never cut or squeezed whatever the terminal's width.
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(5)]
    out = console()
    for row in rows:
        head = "  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True))
        out.print(f"{head}  {row[5]}".rstrip(), markup=False, soft_wrap=True)
        if row[6]:
            out.print(" " * (widths[0] + 2) + row[6], style="dim", markup=False, soft_wrap=True)


def trace(h: dict[str, Any], span_file: str | None) -> None:
    from telemetry.render import read_span_file, render_waterfall, spans_for_saga

    spans = spans_for_saga(read_span_file(Path(span_file)), h["saga_id"]) if span_file else None
    from rich.console import Console

    # A waterfall needs room: never narrower than 120 columns, even in a pipe.
    wide = Console(highlight=False, width=max(console().width, 120))
    render_waterfall(h["events"], spans, console=wide)


__all__ = [
    "PHASES",
    "approval",
    "console",
    "duration",
    "history",
    "line",
    "phase_text",
    "piped",
    "plural",
    "progress",
    "receipt_text",
    "saga_list",
    "status",
    "trace",
    "usage_text",
    "version",
]

"""HTML for the reviewers' pages: pure functions from the services' dicts to strings.

No I/O and no request objects: `web.py` fetches the data and calls these.
Every value that came from a saga, a source, a person or a destination goes
through `html.escape` (attribute values too, always inside double quotes).
A version's markdown is rendered by markdown-it-py with raw HTML disabled,
so markup in a document shows as text and unsafe link schemes are dropped.
The pages carry a little inline CSS and no script.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote

from markdown_it import MarkdownIt

FORM_TOKEN_FIELD = "form_token"

_CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1f2937;background:#f9fafb}
header{background:#111827;color:#f9fafb;padding:.6rem 1.5rem}
header a{color:#f9fafb;text-decoration:none;font-weight:600}
main{max-width:64rem;margin:0 auto;padding:1rem 1.5rem 3rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem;background:#fff}
th,td{border:1px solid #e5e7eb;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600}
code,pre,.mono{font-family:ui-monospace,monospace;font-size:.9em}
pre{background:#fff;border:1px solid #e5e7eb;padding:.6rem;overflow:auto}
.badge{display:inline-block;padding:.05rem .5rem;border-radius:.7rem;color:#fff;font-size:.85em;
 font-weight:600;background:#6b7280}
.t-review{background:#2563eb}.t-approved{background:#7c3aed}.t-busy{background:#d97706}
.t-good{background:#15803d}.t-bad{background:#b91c1c}.t-unknown{background:#92400e}.t-mute{background:#4b5563}
.digest{font:600 1.05rem ui-monospace,monospace;background:#fef3c7;border:2px solid #f59e0b;
 padding:.5rem .8rem;word-break:break-all}
.markdown{background:#fff;border:1px solid #e5e7eb;padding:.2rem 1.2rem}
.notice{background:#dcfce7;border:1px solid #16a34a;padding:.5rem .8rem}
.error{background:#fee2e2;border:1px solid #dc2626;padding:.5rem .8rem}
.warn{background:#fef3c7;border:1px solid #d97706;padding:.5rem .8rem}
form{background:#fff;border:1px solid #e5e7eb;padding:.6rem 1rem;margin:.5rem 0}
label{display:inline-block;margin-right:1rem}
.del{color:#b91c1c}.add{color:#15803d}.hunk{color:#6b7280}
"""

# Badge colour by state or status word; a word not listed is grey.
_TONES = {
    "ready-for-review": "review",
    "approved": "approved",
    "approval_required": "approved",
    "executing": "busy",
    "succeeded": "good",
    "done": "good",
    "ok": "good",
    "pass": "good",
    "replayed": "good",
    "failed": "bad",
    "error": "bad",
    "rejected": "bad",
    "changes_requested": "bad",
    "effect-unknown": "unknown",
    "uncertain": "unknown",
    "cancelled": "mute",
    "compensated": "mute",
}


def _e(value: object) -> str:
    return escape("" if value is None else str(value))


def saga_href(saga_id: str, *rest: object) -> str:
    """The page path of a saga (or of something under it)."""
    return "/sagas/" + "/".join(quote(str(part), safe="") for part in (saga_id, *rest))


def badge(state: object) -> str:
    text = "" if state is None else str(state)
    return f'<span class="badge t-{_TONES.get(text, "other")}">{_e(text)}</span>'


def render_markdown(markdown: str) -> str:
    """Markdown to HTML with raw HTML disabled (it shows as text)."""
    return str(MarkdownIt("commonmark", {"html": False}).render(markdown))


def layout(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)} · Pressroom</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        '<header><a href="/">Pressroom</a> · reviewers</header>\n'
        f"<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def error_page(status_code: int, message: str) -> str:
    body = (
        f'<h1>Error {status_code}</h1>\n<p class="error">{_e(message)}</p>\n<p><a href="/">All sagas</a></p>'
    )
    return layout(f"Error {status_code}", body)


def saga_list(payload: Mapping[str, Any]) -> str:
    rows = []
    for s in payload.get("sagas", []):
        rows.append(
            "<tr>"
            f'<td><a class="mono" href="{_e(saga_href(s["saga_id"]))}">{_e(s["saga_id"][:12])}</a></td>'
            f"<td>{badge(s.get('state'))}</td><td>v{_e(s.get('version'))}</td>"
            f"<td>{_e(s.get('title') or '')}</td><td>{_e(s.get('created_by'))}</td>"
            f"<td>{_e(s.get('updated_at') or '')}</td></tr>"
        )
    table = (
        "<table><tr><th>saga</th><th>state</th><th>version</th><th>title</th><th>submitted by</th>"
        "<th>updated</th></tr>\n" + "\n".join(rows) + "\n</table>"
        if rows
        else "<p>No sagas yet. Submit one with <code>pressroom submit</code> or <code>POST /api/sagas</code>.</p>"
    )
    return layout("Sagas", f"<h1>Sagas</h1>\n{table}")


# -- one saga ------------------------------------------------------------------


def _receipt(receipt: Any) -> str:
    if not receipt:
        return ""
    if isinstance(receipt, Mapping):
        for key in ("path", "commit"):
            if receipt.get(key):
                return f"{_e(key)} <code>{_e(receipt[key])}</code>"
    return f"<code>{_e(json.dumps(receipt, sort_keys=True, default=str)[:300])}</code>"


def _destinations(status: Mapping[str, Any]) -> str:
    rows = [
        f"<tr><td><code>{_e(d['uri'])}</code></td><td>{badge(d.get('state'))}</td>"
        f"<td><code>{_e(d.get('idempotency_key') or '')}</code></td><td>{_receipt(d.get('receipt'))}</td></tr>"
        for d in status.get("destinations", [])
    ]
    return (
        "<h2>Destinations</h2>\n<table><tr><th>destination</th><th>state</th><th>idempotency key</th>"
        "<th>receipt</th></tr>\n" + "\n".join(rows) + "\n</table>"
    )


def _approval(status: Mapping[str, Any]) -> str:
    a = status.get("approval")
    if not a:
        return ""
    fate = (
        f"consumed {_e(a['consumed_at'])}"
        if a.get("consumed_at")
        else f"voided {_e(a['voided_at'])}"
        if a.get("voided_at")
        else f"expires {_e(a.get('expires_at'))}"
    )
    return (
        f"<p>Latest approval: v{_e(a.get('version'))} "
        f"(<code>{_e((a.get('version_digest') or '')[:12])}</code>) by {_e(a.get('approver'))}, {fate}.</p>"
    )


def _citations(version: Mapping[str, Any]) -> str:
    cites = version.get("citations") or []
    if not cites:
        return "<h3>Citations</h3>\n<p>None.</p>"
    rows = [
        f"<tr><td>{_e(c.get('marker'))}</td><td><code>{_e(c.get('source'))}</code></td>"
        f"<td>{_e(c.get('quote'))}</td><td><code>{_e((c.get('source_digest') or '')[:12])}</code></td></tr>"
        for c in cites
    ]
    return (
        "<h3>Citations</h3>\n<table><tr><th>marker</th><th>source</th><th>verbatim quote</th>"
        "<th>source digest</th></tr>\n" + "\n".join(rows) + "\n</table>"
    )


def _review(version: Mapping[str, Any]) -> str:
    review = version.get("review")
    if not review:
        return "<h3>Review</h3>\n<p>Not reviewed yet.</p>"
    findings = review.get("findings") or []
    head = (
        f"<h3>Review</h3>\n<p>Verdict {badge(review.get('verdict'))} · "
        f"{_e(review.get('checked_citations', 0))} citations checked · {len(findings)} findings</p>"
    )
    if not findings:
        return head
    rows = [
        f"<tr><td>{_e(f.get('severity', ''))}</td><td>{_e(f.get('rule'))}</td><td>{_e(f.get('location'))}</td>"
        f"<td>{_e(f.get('message'))}</td></tr>"
        for f in findings
    ]
    return (
        head
        + "\n<table><tr><th>severity</th><th>rule</th><th>where</th><th>finding</th></tr>\n"
        + "\n".join(rows)
        + "\n</table>"
    )


def _flagged(version: Mapping[str, Any]) -> str:
    merged: dict[str, list[str]] = {}
    for item in version.get("suspicious_sources") or []:
        reasons = merged.setdefault(str(item.get("source")), [])
        reasons.extend(r for r in item.get("reasons", []) if r not in reasons)
    if not merged:
        return ""
    items = [
        f"<li><code>{_e(source)}</code>: {_e('; '.join(reasons))}</li>" for source, reasons in merged.items()
    ]
    return (
        '<h3>Flagged sources</h3>\n<div class="warn"><p>These sources contain text that reads as '
        "instructions; it was treated as data, never followed.</p>\n<ul>" + "\n".join(items) + "</ul></div>"
    )


def version_section(version: Mapping[str, Any], head_version: int) -> str:
    """A version: its digest, rendered markdown, citations, review and flagged sources."""
    number = version["version"]
    stale = (
        ""
        if version.get("is_head")
        else f'<p class="warn">This is not the head version (the head is v{_e(head_version)}); '
        "it cannot be approved.</p>"
    )
    return (
        f'<section id="version">\n<h2>Version {_e(number)} <small>by {_e(version.get("author"))}, '
        f"{_e(version.get('created_at'))}</small></h2>\n"
        f'<p>Version digest (sha256 of the markdown):</p>\n<p class="digest">{_e(version["version_digest"])}</p>\n'
        f'{stale}\n<article class="markdown">\n{render_markdown(version.get("markdown") or "")}</article>\n'
        f"{_citations(version)}\n{_review(version)}\n{_flagged(version)}\n</section>"
    )


def _forms(
    status: Mapping[str, Any], version: Mapping[str, Any], token: str, values: Mapping[str, str]
) -> str:
    saga_id = status["saga_id"]
    number = version["version"]
    hidden = f'<input type="hidden" name="{FORM_TOKEN_FIELD}" value="{_e(token)}">'
    return (
        "<h2>Decide</h2>\n"
        f'<form method="post" action="{_e(saga_href(saga_id, "approve"))}">\n{hidden}\n'
        f'<input type="hidden" name="version" value="{_e(number)}">\n'
        f"<p><strong>Approve version {_e(number)}</strong> "
        f"(<code>{_e(version['version_digest'][:16])}</code>…) for "
        f"{_e(', '.join(d['uri'] for d in status.get('destinations', [])))}.</p>\n"
        f'<label>Your name <input name="name" required maxlength="100" value="{_e(values.get("name", ""))}">'
        "</label>\n"
        '<label>Expires in <input name="expires_in" placeholder="24h" size="6" '
        f'value="{_e(values.get("expires_in", ""))}"></label>\n'
        f'<button type="submit">Approve v{_e(number)}</button>\n</form>\n'
        f'<form method="post" action="{_e(saga_href(saga_id, "reject"))}">\n{hidden}\n'
        "<p><strong>Reject</strong>: the writer makes a new version with your reason.</p>\n"
        f'<label>Your name <input name="name" required maxlength="100" value="{_e(values.get("name", ""))}">'
        "</label>\n"
        f'<label>Reason <input name="reason" required size="50" value="{_e(values.get("reason", ""))}"></label>\n'
        '<button type="submit">Reject</button>\n</form>'
    )


def _versions_nav(saga_id: str, head_version: int) -> str:
    if head_version < 1:
        return ""
    items = []
    for n in range(head_version, 0, -1):
        diff = (
            f' · <a href="{_e(saga_href(saga_id, "diff", n - 1, n))}">diff v{n - 1}→v{n}</a>' if n > 1 else ""
        )
        items.append(f'<li><a href="{_e(saga_href(saga_id, "versions", n))}">v{n}</a>{diff}</li>')
    return "<h2>Versions</h2>\n<ul>" + "".join(items) + "</ul>"


def _clock(value: Any) -> str:
    return str(value or "")[11:23]


def _phases(event: Mapping[str, Any]) -> str:
    stamps = [(name, event.get(f"{name}_at")) for name in ("proposed", "authorized", "sent", "acked")]
    if not stamps[0][1]:
        return ""
    start = datetime.fromisoformat(str(stamps[0][1]))
    parts = [f"proposed {_clock(stamps[0][1])}"]
    for name, value in stamps[1:]:
        if value:
            ms = (datetime.fromisoformat(str(value)) - start).total_seconds() * 1000
            parts.append(f"{name} +{ms:.1f} ms")
    return _e(" → ".join(parts))


def _history(history: Mapping[str, Any]) -> str:
    rows = []
    for ev in history.get("events", []):
        detail = ev.get("detail") or {}
        note = detail.get("reason") or detail.get("to") or detail.get("key") or ""
        rows.append(
            f'<tr><td class="mono">{_e(_clock(ev.get("created_at")))}</td><td>{_e(ev.get("actor"))}</td>'
            f"<td>{_e(ev.get('kind'))}</td><td>{_e(ev.get('tool') or '')}</td><td>{badge(ev.get('status'))}</td>"
            f'<td class="mono">{_phases(ev)}</td><td>{_e(str(note)[:160])}</td></tr>'
        )
    return (
        "<h2>History</h2>\n<table><tr><th>time (UTC)</th><th>actor</th><th>kind</th><th>tool</th>"
        "<th>status</th><th>phase times</th><th>note</th></tr>\n" + "\n".join(rows) + "\n</table>"
    )


def _header(status: Mapping[str, Any], notice: str | None, error: str | None) -> str:
    parts = [
        f"<h1>{_e(status.get('title') or 'Untitled')} {badge(status.get('state'))}</h1>",
        f"<p>Saga <code>{_e(status['saga_id'])}</code>, submitted by {_e(status.get('created_by'))} "
        f"at {_e(status.get('created_at'))}; head version v{_e(status.get('version'))}.</p>",
        f"<p>Brief: {_e(status.get('brief'))}</p>",
    ]
    if status.get("reason"):
        parts.append(f'<p class="warn">Reason: {_e(status["reason"])}</p>')
    if status.get("state") == "effect-unknown":
        parts.append(
            '<p class="warn">A destination may or may not have applied the publish. A person settles it '
            f"with <code>pressroom reconcile {_e(status['saga_id'])}</code>.</p>"
        )
    if notice:
        parts.append(f'<p class="notice">{_e(notice)}</p>')
    if error:
        parts.append(f'<p class="error" role="alert">{_e(error)}</p>')
    return "\n".join(parts)


def saga_page(
    status: Mapping[str, Any],
    version: Mapping[str, Any] | None,
    history: Mapping[str, Any] | None,
    *,
    token: str,
    notice: str | None = None,
    error: str | None = None,
    values: Mapping[str, str] | None = None,
) -> str:
    """The saga page; with `history` None it is the page of one (older or head) version."""
    head = int(status.get("version") or 0)
    sections = [_header(status, notice, error), _destinations(status), _approval(status)]
    if version is not None:
        sections.append(version_section(version, head))
        if status.get("state") == "ready-for-review" and version.get("is_head"):
            sections.append(_forms(status, version, token, values or {}))
    else:
        sections.append("<p>No version yet: the researcher and writer are still working.</p>")
    sections.append(_versions_nav(status["saga_id"], head))
    if history is not None:
        sections.append(_history(history))
    else:
        sections.append(f'<p><a href="{_e(saga_href(status["saga_id"]))}">Back to the saga</a></p>')
    title = status.get("title") or status["saga_id"]
    if history is None and version is not None:
        title = f"v{version['version']} of {title}"
    return layout(str(title), "\n".join(s for s in sections if s))


def diff_page(saga_id: str, a: int, b: int, text: str) -> str:
    lines = []
    for line in text.splitlines():
        css = (
            "hunk"
            if line.startswith("@@")
            else "del"
            if line.startswith("-")
            else "add"
            if line.startswith("+")
            else ""
        )
        lines.append(f'<span class="{css}">{_e(line)}</span>' if css else _e(line))
    body = (
        f"<h1>Diff v{_e(a)} → v{_e(b)}</h1>\n<p>Saga <code>{_e(saga_id)}</code> · "
        f'<a href="{_e(saga_href(saga_id))}">back to the saga</a></p>\n'
        f"<pre>{chr(10).join(lines) or '(no differences)'}</pre>"
    )
    return layout(f"Diff v{a}→v{b}", body)


__all__ = [
    "FORM_TOKEN_FIELD",
    "badge",
    "diff_page",
    "error_page",
    "layout",
    "render_markdown",
    "saga_href",
    "saga_list",
    "saga_page",
    "version_section",
]

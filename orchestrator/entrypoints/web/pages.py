"""HTML for the reviewers' pages: Jinja2 templates over the services' dicts.

No I/O beyond reading the templates shipped in the package
(`orchestrator/entrypoints/web/templates/`) and no request objects: `web.py`
fetches the data and calls these. Autoescape is on for every template, so a
value from a saga, a source, a person or a destination is escaped unless it
is `Markup`; the only `Markup` the pages make is a version's markdown
rendered by markdown-it-py with raw HTML disabled (markup in a document
shows as text and unsafe link schemes are dropped) and the document body
`document.render_document` builds from it, escaping every value itself. The
pages carry inline CSS; the saga page also loads one script of ours
(`web_live`), with the response's nonce. The timeline is inline SVG drawn
from `timeline.layout`.
"""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup

from orchestrator.entrypoints.web.actions import operator_actions, trace_href
from orchestrator.entrypoints.web.document import anchor_of
from orchestrator.entrypoints.web.timeline import human
from orchestrator.findings import finding_id
from orchestrator.quoted import origins_of
from sagas.machine import SagaState

FORM_TOKEN_FIELD = "form_token"
STATES = tuple(state.value for state in SagaState)

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
    "applied": "good",  # a destination's status answer (the reconcile page)
    "absent": "mute",
    # A pipeline role's latest run, and a reviewer role's verdict.
    "queued": "busy",
    "waiting": "mute",
    "unchanged": "mute",
    "fail": "bad",
}


@dataclass(frozen=True)
class Viewer:
    """Who is looking, for the page header and which forms to show.

    `mode` is ``open`` (no user exists: nobody signs in) or ``closed``;
    `name` is the signed-in user's (None: not signed in), `roles` theirs,
    `csrf` the form token the sign-out form carries, and `proxied` says a
    trusted proxy signed them in (so there is no session to sign out of).
    """

    mode: str = "open"
    name: str | None = None
    roles: tuple[str, ...] = ()
    csrf: str = ""
    proxied: bool = False

    @property
    def closed(self) -> bool:
        return self.mode == "closed"

    def holds(self, role: str) -> bool:
        """Whether the forms of `role` are shown: always in open mode, by role when signed in."""
        return not self.closed or role in self.roles


OPEN_VIEWER = Viewer()


def saga_href(saga_id: str, *rest: object) -> str:
    """The page path of a saga (or of something under it)."""
    return "/sagas/" + "/".join(quote(str(part), safe="") for part in (saga_id, *rest))


def render_markdown(markdown: str) -> Markup:
    """Markdown to HTML with raw HTML disabled (it shows as text)."""
    return Markup(_markdown().render(markdown))


@cache
def _markdown() -> MarkdownIt:
    """One renderer for the process (a render keeps no state on it)."""
    return MarkdownIt("commonmark", {"html": False})


def _finalize(value: object) -> object:
    """None prints as nothing; plain text is escaped as `html.escape` does (quotes too)."""
    if value is None:
        return ""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value)))


def _tone(state: object) -> str:
    return _TONES.get("" if state is None else str(state), "other")


def _receipt(receipt: Any) -> tuple[str, str] | None:
    """(label, text) for a destination's receipt: its path or commit, else its JSON."""
    if not receipt:
        return None
    if isinstance(receipt, Mapping):
        for key in ("path", "commit"):
            if receipt.get(key):
                return key, str(receipt[key])
    return "", json.dumps(receipt, sort_keys=True, default=str)[:300]


def _flagged(version: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Flagged sources, one row per source with its distinct reasons joined."""
    merged: dict[str, list[str]] = {}
    for item in version.get("suspicious_sources") or []:
        reasons = merged.setdefault(str(item.get("source")), [])
        reasons.extend(r for r in item.get("reasons", []) if r not in reasons)
    return [(source, "; ".join(reasons)) for source, reasons in merged.items()]


def _destination_uris(status: Mapping[str, Any]) -> str:
    return ", ".join(str(d["uri"]) for d in status.get("destinations", []))


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
    return " → ".join(parts)


def _note(event: Mapping[str, Any]) -> str:
    detail = event.get("detail") or {}
    return str(detail.get("reason") or detail.get("to") or detail.get("key") or "")[:160]


def _usage(usage: Mapping[str, Any] | None) -> str:
    """A saga's (or a role's) model use: `2 model calls · 1,200 tokens in · 300 out · $0.0012`."""
    spent = usage or {}
    calls = int(spent.get("model_calls") or 0)
    return (
        f"{calls} model call{'' if calls == 1 else 's'} · {int(spent.get('tokens_in') or 0):,} tokens in"
        f" · {int(spent.get('tokens_out') or 0):,} out · ${float(spent.get('cost_usd') or 0):.4f}"
    )


def _join_text(items: Any, separator: str) -> str:
    return separator.join(str(item) for item in items)


def _short(digest: object, n: int = 12) -> str:
    return str(digest or "")[:n]


def _diff_class(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("-"):
        return "del"
    if line.startswith("+"):
        return "add"
    return ""


@cache
def environment() -> Environment:
    """The one template environment: package templates, autoescape on, strict names."""
    env = Environment(
        loader=PackageLoader("orchestrator.entrypoints.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        tone=_tone,
        receipt=_receipt,
        flagged=_flagged,
        origins=origins_of,
        destination_uris=_destination_uris,
        clock=_clock,
        phases=_phases,
        note=_note,
        markdown=render_markdown,
        join_text=_join_text,
        human=human,
        short=_short,
        anchor=anchor_of,
        finding_id=finding_id,
        shell=shlex.quote,
        usage=_usage,
    )
    env.globals.update(saga_href=saga_href, token_field=FORM_TOKEN_FIELD)
    return env


def render(template: str, *, title: str, viewer: Viewer | None = None, **context: Any) -> str:
    """Render one page template with the layout's `title` and `viewer`."""
    return environment().get_template(template).render(title=title, viewer=viewer, **context)


def error_page(status_code: int, message: str, *, viewer: Viewer | None = None) -> str:
    return render(
        "error.html", title=f"Error {status_code}", viewer=viewer, status_code=status_code, message=message
    )


def saga_list(
    payload: Mapping[str, Any],
    *,
    viewer: Viewer | None = None,
    filters: Mapping[str, str] | None = None,
    paged: bool = False,
) -> str:
    """The list of sagas, with its tabs, filters and the link to the next page."""
    shown = dict(filters or {"view": "all", "state": "", "q": ""})
    mine = viewer is not None and viewer.closed
    title = (
        ("Waiting for my review" if mine else "Waiting for review")
        if shown.get("view") == "waiting"
        else "Sagas"
    )
    return render(
        "saga_list.html",
        title=title,
        viewer=viewer,
        sagas=list(payload.get("sagas", [])),
        filters=shown,
        states=STATES,
        next_cursor=payload.get("next"),
        paged=paged,
        waiting_count=payload.get("waiting_count"),
        waiting_more=payload.get("waiting_more", False),
        list_href=list_href,
    )


def list_href(filters: Mapping[str, str], **changes: str | None) -> str:
    """The list page's URL with `filters`, some changed (None drops one). The view is
    always named: `/` alone is the visitor's landing view, which differs by role."""
    merged: dict[str, str | None] = {**filters, **changes}
    query = urlencode({k: v for k, v in merged.items() if v})
    return "/" + (f"?{query}" if query else "")


def saga_page(
    status: Mapping[str, Any],
    version: Mapping[str, Any] | None,
    history: Mapping[str, Any] | None,
    *,
    token: str,
    notice: str | None = None,
    error: str | None = None,
    values: Mapping[str, str] | None = None,
    viewer: Viewer | None = None,
    workspace: Mapping[str, Any] | None = None,
    nonce: str | None = None,
    trace_url: str | None = None,
) -> str:
    """The saga page; with `history` None it is the page of one (older or head) version.

    `workspace` (see `workspace.load_workspace`) adds the reviewer's workspace:
    the body with its quotes and findings, the versions, the timeline; with
    `nonce` the page loads its live-update script. `trace_url` is
    `PRESSROOM_TRACE_URL`, the link the saga's trace id is shown with.
    """
    title = status.get("title") or status["saga_id"]
    trace_id = (workspace or {}).get("trace_id")
    if history is None and version is not None:
        title = f"v{version['version']} of {title}"
    return render(
        "saga.html",
        title=str(title),
        viewer=viewer,
        status=status,
        version=version,
        history=history,
        head_version=int(status.get("version") or 0),
        token=token,
        notice=notice,
        error=error,
        values=values or {},
        workspace=workspace,
        nonce=nonce,
        live_url=saga_href(status["saga_id"], "live") if nonce else None,
        actions=operator_actions(
            str(status.get("state")),
            (str(d.get("state")) for d in status.get("destinations", [])),
            int(status.get("version") or 0),
        ),
        trace_id=trace_id,
        trace_link=trace_href(trace_url, trace_id),
    )


def diff_page_of(data: Mapping[str, Any], *, viewer: Viewer | None = None) -> str:
    """The side-by-side word diff of two versions (`workspace.load_diff`)."""
    old, new = data["old"], data["new"]
    status = data["status"]
    return render(
        "diff.html",
        title=f"v{old['version']} → v{new['version']} of {status.get('title') or status['saga_id']}",
        viewer=viewer,
        status=status,
        saga_id=status["saga_id"],
        old=old,
        new=new,
        rows=data["rows"],
        summary=data["summary"],
        versions=data["versions"],
    )


def diff_page(saga_id: str, a: int, b: int, text: str, *, viewer: Viewer | None = None) -> str:
    lines = [(_diff_class(line), line) for line in text.splitlines()]
    return render("diff.html", title=f"Diff v{a}→v{b}", viewer=viewer, saga_id=saga_id, a=a, b=b, lines=lines)


__all__ = [
    "FORM_TOKEN_FIELD",
    "OPEN_VIEWER",
    "Viewer",
    "diff_page",
    "diff_page_of",
    "list_href",
    "environment",
    "error_page",
    "render",
    "render_markdown",
    "saga_href",
    "saga_list",
    "saga_page",
]

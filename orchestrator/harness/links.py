"""Where a document may link: the structural rule that needs no detector. No I/O.

A version, and every page published from it, may link or embed an image
only from a host in `PRESSROOM_LINK_HOSTS` (a host or any of its
subdomains); unset, there is no such host, so no external link or image at
all. A target counts as external when a browser would fetch it from a host:
``http(s)://host``, protocol-relative ``//host/x`` (and ``/\\host``), and
scheme-less ``host.example/x`` or ``www.host.example``. Any other scheme
(``javascript:``, ``data:``, ``file:``, ``site:`` …) is never allowed; a
relative path (``page.html``, ``img/a.png``) stays on the page's own site.

`links_in()` reads markdown the way the site renders it (CommonMark, raw
HTML off): every link and image target, reference definitions and
autolinks included, plus URL-like text in the prose (a reader, or another
renderer with autolinking, would follow it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the parser loads on first use: commands that check no links stay light
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

Kind = Literal["link", "image", "text"]
WEB_SCHEMES: Final = frozenset({"http", "https"})

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.IGNORECASE)
_HOSTLIKE = re.compile(
    r"^(?:www\.[^/?#\s]+(?=[/?#]|$)|[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?=[/?#]))", re.IGNORECASE
)
_TEXT_URL = re.compile(
    r"""(?:\b[a-z][a-z0-9+.-]*://[^\s<>"')\]]+
        |(?<![\w:/.])//[\w-]+(?:\.[\w-]+)+[^\s<>"')\]]*
        |\bwww\.[\w-]+(?:\.[\w-]+)+[^\s<>"')\]]*
        |\b[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}/[^\s<>"')\]]*
        |\b(?:javascript|data|vbscript):[^\s<>"')\]]+)""",
    re.IGNORECASE | re.VERBOSE,
)
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": ".", "\\": "/"})
_IGNORED = re.compile(r"[\x00-\x20\u00ad\u200b-\u200f\u2060\ufeff]")


@dataclass(frozen=True)
class Link:
    """One target found in a document: what carries it, and the target as written."""

    kind: Kind
    url: str


@dataclass(frozen=True)
class LinkPolicy:
    """The hosts links and images may point to (lower case, no trailing dot)."""

    hosts: frozenset[str] = frozenset()

    def allows(self, url: str) -> bool:
        scheme, host = target_of(url)
        if scheme is not None and scheme not in WEB_SCHEMES:
            return False
        if host is None:
            return scheme is None  # a relative path; `http:` with no host is refused
        return any(host == h or host.endswith("." + h) for h in self.hosts)


def target_of(url: str) -> tuple[str | None, str | None]:
    """(scheme, host) of a link target as a browser would read it; None where there is none."""
    cleaned = _IGNORED.sub("", url).translate(_DOTS)
    scheme_match = _SCHEME.match(cleaned)
    scheme = scheme_match.group(1).lower() if scheme_match else None
    if scheme is not None:
        rest = cleaned[scheme_match.end() :] if scheme_match else cleaned
        if scheme not in WEB_SCHEMES:
            return scheme, None
        return scheme, _host(rest.lstrip("/")) if rest.startswith("/") or rest else None
    if cleaned.startswith("//"):
        return None, _host(cleaned.lstrip("/"))
    hostlike = _HOSTLIKE.match(cleaned)
    return (None, _host(hostlike.group(0))) if hostlike else (None, None)


def _host(authority_and_path: str) -> str | None:
    try:
        host = urlsplit("//" + authority_and_path).hostname
    except ValueError:
        return "invalid"
    return host.rstrip(".").lower() if host else None


@cache
def _parser() -> MarkdownIt:
    """One parser for the process: building one costs more than parsing a page, and a
    parse keeps no state on it, so threads share it."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False})


def links_in(markdown: str) -> list[Link]:
    """Every link, image and URL-like text in `markdown`, in document order."""
    found: list[Link] = []
    for token in _parser().parse(markdown):
        _collect(token, found)
    return found


def _collect(token: Token, found: list[Link]) -> None:
    if token.type == "link_open":
        found.append(Link("link", str(token.attrGet("href") or "")))
    elif token.type == "image":
        found.append(Link("image", str(token.attrGet("src") or "")))
    elif token.type in ("text", "code_inline", "code_block", "fence"):
        found.extend(Link("text", m.group(0)) for m in _TEXT_URL.finditer(token.content.translate(_DOTS)))
    for child in token.children or ():
        _collect(child, found)


def foreign_links(markdown: str, policy: LinkPolicy) -> list[Link]:
    """The targets in `markdown` that `policy` does not allow, once each."""
    out: list[Link] = []
    for link in links_in(markdown):
        if not policy.allows(link.url) and link not in out:
            out.append(link)
    return out


def describe(links: list[Link], limit: int = 3) -> str:
    """``image //evil.example/p.png, link javascript:…`` for an error message."""
    shown = ", ".join(f"{link.kind} {link.url[:80]}" for link in links[:limit])
    return shown + (f" and {len(links) - limit} more" if len(links) > limit else "")


__all__ = ["Link", "LinkPolicy", "describe", "foreign_links", "links_in", "target_of"]

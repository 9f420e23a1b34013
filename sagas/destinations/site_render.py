"""How a `site:` folder's pages look: HTML pages, their index, one stylesheet.

`render_page()` turns a version's markdown into a page: raw HTML in the
markdown is escaped (markdown-it with `html` off, its link validation on),
each citation marker `[n]` in the text becomes a link to the matching line of
the closing `## Sources` list, and that line links back to where it was first
cited. `render_index()` lists the pages the folder holds now. Both fill Jinja2
templates (`site_templates/`) with autoescape on. `STYLESHEET` is the CSS that
`site.py` writes once beside the pages as `style.css`.

Pure: no I/O beyond reading the packaged templates.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Final

from orchestrator.harness.links import LinkPolicy

if TYPE_CHECKING:  # loaded on first render: opening the registry stays light
    from jinja2 import Environment
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

STYLESHEET_NAME: Final = "style.css"
STYLESHEET: Final = (files("sagas.destinations") / "site_templates" / STYLESHEET_NAME).read_text(
    encoding="utf-8"
)
SOURCES_HEADING: Final = "sources"
_MARKER = re.compile(r"\[([1-9][0-9]*)\](?![(:\[])")


@cache
def _templates() -> Environment:
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(
        loader=PackageLoader("sagas.destinations", "site_templates"),
        autoescape=select_autoescape(["html"]),
        keep_trailing_newline=True,
    )


@cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False})
    md.core.ruler.push("pressroom_citations", _link_citations)
    return md


def render_page(title: str, markdown: str, link_hosts: frozenset[str] = frozenset()) -> str:
    """The HTML page for one version, with linked citation markers and footnotes;
    no link or image outside `link_hosts` survives the sanitiser."""
    from markupsafe import Markup

    from sagas.destinations.sanitise import sanitise_html

    # Safe to mark: markdown-it escaped all raw HTML and text, the anchors above are built
    # from digits, and nh3 keeps only CommonMark's tags and allowed targets.
    body = Markup(sanitise_html(_markdown().render(markdown), LinkPolicy(link_hosts)))
    return _templates().get_template("page.html").render(title=title, body=body, stylesheet=STYLESHEET_NAME)


def render_index(pages: dict[str, str]) -> str:
    """The index listing `pages` (slug -> title), sorted by title."""
    ordered = sorted(pages.items(), key=lambda item: (item[1].casefold(), item[0]))
    return _templates().get_template("index.html").render(pages=ordered, stylesheet=STYLESHEET_NAME)


def _link_citations(state: StateCore) -> None:
    """Markers in the body link to `#source-n`; the Sources list's `[n]` become those targets."""
    in_sources = False
    cited: set[str] = set()
    tokens = state.tokens
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            title = (following.content if following is not None else "").strip().casefold()
            in_sources = token.tag == "h2" and title == SOURCES_HEADING
            if in_sources:
                token.attrSet("class", "footnotes")
            continue
        if token.type == "bullet_list_open" and in_sources:
            token.attrSet("class", "footnotes")
            continue
        if token.type != "inline" or token.children is None or tokens[index - 1].type == "heading_open":
            continue
        token.children = _with_links(token.children, in_sources, cited)


def _with_links(children: list[Token], in_sources: bool, cited: set[str]) -> list[Token]:
    out: list[Token] = []
    for child in children:
        if child.type != "text" or not _MARKER.search(child.content):
            out.append(child)
            continue
        position = 0
        for match in _MARKER.finditer(child.content):
            if match.start() > position:
                out.append(_text(child.content[position : match.start()]))
            out.append(_html(_anchor(match.group(1), in_sources, cited)))
            position = match.end()
            if in_sources:
                out.append(_text(child.content[position:]))
                position = len(child.content)
                break
        if position < len(child.content):
            out.append(_text(child.content[position:]))
    return out


def _anchor(number: str, in_sources: bool, cited: set[str]) -> str:
    n = int(number)  # digits only, by the marker pattern
    if in_sources:
        return f'<a class="back" id="source-{n}" href="#cite-{n}">[{n}]</a>'
    first = number not in cited
    cited.add(number)
    anchor_id = f' id="cite-{n}"' if first else ""
    return f'<sup class="cite"><a{anchor_id} href="#source-{n}">[{n}]</a></sup>'


def _text(content: str) -> Token:
    from markdown_it.token import Token

    token = Token("text", "", 0)
    token.content = content
    return token


def _html(content: str) -> Token:
    from markdown_it.token import Token

    token = Token("html_inline", "", 0)
    token.content = content
    return token


__all__ = ["STYLESHEET", "STYLESHEET_NAME", "render_index", "render_page"]

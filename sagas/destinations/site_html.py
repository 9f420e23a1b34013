"""The HTML a `site:` destination writes: Jinja2 templates with autoescape on.

No I/O beyond reading the two templates shipped in
`sagas/destinations/templates/`. A page's title and the index's slugs and
titles are escaped by the template; the page body is the version's markdown
rendered by markdown-it-py with raw HTML disabled (markup in a document
shows as text), the one value marked safe.
"""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("sagas.destinations", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_page(title: str, markdown: str) -> str:
    """The HTML page for one version; markdown's raw HTML is escaped, not passed through."""
    body = Markup(MarkdownIt("commonmark", {"html": False}).render(markdown))
    return _environment().get_template("page.html").render(title=title, body=body)


def render_index(pages: dict[str, str]) -> str:
    """The index listing `pages` (slug -> title), sorted by title."""
    ordered = sorted(pages.items(), key=lambda item: (item[1].casefold(), item[0]))
    return _environment().get_template("index.html").render(pages=ordered)


__all__ = ["render_index", "render_page"]

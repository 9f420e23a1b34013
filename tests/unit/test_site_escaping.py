"""The `site:` destination's HTML: titles and slugs escaped, markdown's raw HTML shown as text."""

from __future__ import annotations

from sagas.destinations.site_render import render_index, render_page
from tests.support.web import tags

PAYLOAD = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


def _elements(page: str) -> set[str]:
    return {tag for tag, _ in tags(page)}


def test_a_page_escapes_its_title_and_the_markdowns_raw_html() -> None:
    page = render_page(PAYLOAD, f"# Heading\n\n{PAYLOAD}\n\n[x](javascript:alert(3))\n")
    assert not _elements(page) & {"img", "script"}
    assert not any(attrs.get("href", "").startswith("javascript:") for _, attrs in tags(page))
    assert "<title>&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<h1>Heading</h1>" in page  # the markdown itself is rendered


def test_the_index_escapes_slugs_and_titles_and_sorts_by_title() -> None:
    index = render_index({"b-page": PAYLOAD, "a-page": "Zebra", 'q"x': "apple"})
    assert not _elements(index) & {"img", "script"}
    assert '<a href="q&#34;x.html">apple</a>' in index
    assert index.index("&#34;&gt;&lt;img") < index.index("apple") < index.index("Zebra")

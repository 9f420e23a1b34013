"""The published `site:` pages: linked citation markers and footnotes, a stylesheet
written once, an index that follows publishes and compensations."""

from __future__ import annotations

import hashlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sagas.destinations.base import PublishedVersion
from sagas.destinations.registry import open_destination
from sagas.destinations.site_render import STYLESHEET, render_page

pytestmark = pytest.mark.unit

DRAFT = (
    "# Millbrook\n\nThe library opened in 1901. [1] It grew fast. [2] Again [1].\n\n"
    "<script>alert(1)</script>\n\n## Sources\n\n- [1] overview.md\n- [2] central-library.md\n"
)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.stylesheets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag == "a" and found.get("href"):
            self.hrefs.append(str(found["href"]))
        if tag == "link" and found.get("rel") == "stylesheet":
            self.stylesheets.append(str(found["href"]))


def _parse(html: str) -> _Links:
    links = _Links()
    links.feed(html)
    return links


def _version(title: str, markdown: str, number: int = 1, saga_id: str = "0" * 32) -> PublishedVersion:
    return PublishedVersion(
        saga_id=saga_id,
        version=number,
        version_digest=hashlib.sha256(markdown.encode()).hexdigest(),
        title=title,
        slug="",
        markdown=markdown,
    )


def test_markers_link_to_footnotes_and_back() -> None:
    page = _parse(render_page("Millbrook", DRAFT))
    local = [h[1:] for h in page.hrefs if h.startswith("#")]
    assert sorted(set(local)) == ["cite-1", "cite-2", "source-1", "source-2"]
    assert all(target in page.ids for target in local), "every in-page link has its target"
    assert len(page.ids) == len(set(page.ids)), "ids are unique even when a marker is cited twice"
    assert page.stylesheets == ["style.css"]


def test_raw_html_and_titles_stay_escaped() -> None:
    html = render_page("A <b>title</b>", DRAFT)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<title>A &lt;b&gt;title&lt;/b&gt;</title>" in html


def test_the_site_folder_gets_a_stylesheet_once_and_an_index_of_what_is_published(tmp_path: Path) -> None:
    dest = open_destination(f"site:{tmp_path}", timeout=5)
    first = dest.publish("k-1", _version("Millbrook", DRAFT))
    assert (tmp_path / "style.css").read_text("utf-8") == STYLESHEET
    (tmp_path / "style.css").write_text("/* the site's own */", encoding="utf-8")
    second = dest.publish("k-2", _version("Bookmobile", "# Bookmobile\n\nRoutes. [1]\n", saga_id="1" * 32))
    assert (tmp_path / "style.css").read_text("utf-8") == "/* the site's own */"
    index = _parse((tmp_path / "index.html").read_text("utf-8"))
    assert index.hrefs == ["bookmobile-11111111.html", "millbrook-00000000.html"]
    assert index.stylesheets == ["style.css"]
    page = _parse((tmp_path / "millbrook-00000000.html").read_text("utf-8"))
    assert "#source-1" in page.hrefs and "index.html" in page.hrefs
    dest.compensate("k-2", second)
    assert _parse((tmp_path / "index.html").read_text("utf-8")).hrefs == ["millbrook-00000000.html"]
    dest.compensate("k-1", first)
    emptied = (tmp_path / "index.html").read_text("utf-8")
    assert _parse(emptied).hrefs == [] and "Nothing is published here now." in emptied

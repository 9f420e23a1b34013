"""The link policy (pure) and the page sanitiser: no link or image outside PRESSROOM_LINK_HOSTS."""

from __future__ import annotations

import pytest

from orchestrator.harness.links import LinkPolicy, foreign_links, links_in, target_of
from sagas.destinations.site import render_page

pytestmark = pytest.mark.unit

ALLOWED = LinkPolicy(frozenset({"photos.example"}))


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://evil.example/x", "evil.example"),
        ("HTTPS://EVIL.example./x", "evil.example"),
        ("//evil.example/pixel.png?leak=1", "evil.example"),
        ("/\\evil.example/x", "evil.example"),
        ("evil.example/pixel.png", "evil.example"),
        ("www.evil.example", "www.evil.example"),
        ("//evil\u3002example/x", "evil.example"),
        ("http://photos.example@evil.example/", "evil.example"),
        ("page.html", None),
        ("img/a.png", None),
    ],
)
def test_the_host_a_browser_would_fetch_from(url: str, host: str | None) -> None:
    assert target_of(url)[1] == host


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://photos.example/a.jpg", True),
        ("https://cdn.photos.example/a.jpg", True),
        ("https://photos.example.evil.example/a.jpg", False),
        ("//evil.example/pixel.png", False),
        ("javascript:alert(1)", False),
        ("data:image/png;base64,AAAA", False),
        ("site:/srv/www", False),
        ("page.html", True),
    ],
)
def test_only_listed_hosts_and_relative_paths_are_allowed(url: str, allowed: bool) -> None:
    assert ALLOWED.allows(url) is allowed


def test_by_default_no_external_link_or_image_at_all() -> None:
    assert not LinkPolicy().allows("https://photos.example/a.jpg")
    assert LinkPolicy().allows("other-page.html")


def test_every_link_form_in_markdown_is_found() -> None:
    markdown = (
        "# T\n\nA ![x](//evil.example/p.png) and [a](https://photos.example/x) and <https://auto.example/>.\n\n"
        "Text www.bare.example and scheme.example/less and [r][ref].\n\n`//code.example/x`\n\n"
        "[ref]: //refdef.example/x\n"
    )
    hosts = {target_of(link.url)[1] for link in links_in(markdown)}
    assert hosts >= {"evil.example", "photos.example", "auto.example", "www.bare.example", "scheme.example"}
    assert hosts >= {"code.example", "refdef.example"}
    assert {target_of(link.url)[1] for link in foreign_links(markdown, ALLOWED)} == hosts - {"photos.example"}


def test_the_page_keeps_no_foreign_link_or_image_even_if_one_gets_through() -> None:
    markdown = (
        "# T\n\n![x](//evil.example/pixel.png?leak=1) [shop](https://evil.example/buy) "
        "[ok](https://photos.example/a) ![ok](https://photos.example/a.png) [local](page.html)\n\n"
        '<img src="https://evil.example/raw.png"> <script>alert(1)</script>\n'
    )
    page = render_page("T", markdown, frozenset({"photos.example"}))
    body = page.split("<main>", 1)[1]
    assert 'src="//evil.example' not in body and 'href="https://evil.example' not in body
    assert "<script" not in body and '<img src="https://evil.example' not in body
    assert 'href="https://photos.example/a"' in body and 'src="https://photos.example/a.png"' in body
    assert 'href="page.html"' in body
    strict = render_page("T", markdown).split("<main>", 1)[1]
    assert 'href="https://photos.example' not in strict and 'src="https://photos.example' not in strict


def test_link_hosts_setting_is_read_as_lower_case_host_names() -> None:
    from orchestrator.core.config import Settings

    assert Settings(link_hosts=" Photos.Example., cdn.example ").allowed_link_hosts() == {
        "photos.example",
        "cdn.example",
    }
    assert Settings(link_hosts=None).allowed_link_hosts() == frozenset()

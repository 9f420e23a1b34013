"""Destination URIs, slugs, keys and path containment: no services, no network."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.errors import InvalidInput
from sagas.destinations.git import GitDestination
from sagas.destinations.memory import MemoryDestination, reset_memory_stores
from sagas.destinations.registry import (
    check_key,
    contained_path,
    known_forms,
    open_destination,
    parse_destination,
    slugify,
)
from sagas.destinations.site import SiteDestination
from sagas.destinations.webhook import WebhookDestination


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("site:./public", ("site", "./public")),
        ("site:/srv/www/site", ("site", "/srv/www/site")),
        ("git:repo", ("git", "repo")),
        ("webhook:https://example.org/hooks/pressroom", ("webhook", "https://example.org/hooks/pressroom")),
        ("webhook:http://127.0.0.1:8080/hook", ("webhook", "http://127.0.0.1:8080/hook")),
        ("memory:demo", ("memory", "demo")),
    ],
)
def test_parse_known_uris(uri: str, expected: tuple[str, str]) -> None:
    assert parse_destination(uri) == expected


def test_open_builds_the_adapter_for_each_scheme(tmp_path: Path) -> None:
    assert isinstance(open_destination(f"site:{tmp_path}", timeout=1), SiteDestination)
    assert isinstance(open_destination(f"git:{tmp_path}", timeout=1), GitDestination)
    assert isinstance(open_destination("webhook:https://example.org/h", timeout=1), WebhookDestination)
    memory = open_destination("memory:uri-test", timeout=1)
    assert isinstance(memory, MemoryDestination)
    assert memory.uri == "memory:uri-test"
    reset_memory_stores()


def test_opening_touches_nothing(tmp_path: Path) -> None:
    open_destination(f"site:{tmp_path / 'site'}", timeout=1)
    open_destination(f"git:{tmp_path / 'repo'}", timeout=1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("uri", ["ftp:/x", "s3:bucket", "Site:/x", "http://example.org/hook"])
def test_unknown_scheme_is_refused_with_a_hint(uri: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_destination(uri)
    message = str(caught.value)
    for form in ("site:PATH", "git:PATH", "webhook:URL", "memory:NAME"):
        assert form in message
    assert caught.value.exit_code == 2
    assert caught.value.uri == uri  # type: ignore[attr-defined]


def test_known_forms_lists_every_scheme() -> None:
    assert known_forms() == ["site:PATH", "git:PATH", "webhook:URL", "email:ADDR[,ADDR...]", "memory:NAME"]


@pytest.mark.parametrize("uri", ["site", "", ":x", "site:", "git:  ", "webhook:", "memory:"])
def test_missing_scheme_or_empty_target_is_refused(uri: str) -> None:
    with pytest.raises(InvalidInput):
        parse_destination(uri)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.org/x", "example.org/hook", "https://", "file:///etc/passwd", "javascript:alert(1)"],
)
def test_webhook_needs_an_http_url_with_a_host(url: str) -> None:
    with pytest.raises(InvalidInput, match="http"):
        parse_destination(f"webhook:{url}")


def test_timeout_must_be_positive() -> None:
    with pytest.raises(InvalidInput):
        open_destination("memory:x", timeout=0)


def test_invalid_input_pickles_with_its_attributes() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_destination("nope:x")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is InvalidInput and copy.uri == "nope:x"  # type: ignore[attr-defined]


# -- slugs ---------------------------------------------------------------------------

SAFE_SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Quarterly Report", "quarterly-report"),
        ("  Caf\u00e9 M\u00fcller: 2024/Q3!  ", "cafe-muller-2024-q3"),
        ("../../etc", "etc"),
        ("a/b\\c", "a-b-c"),
        ("---", None),
        ("", None),
        ("\u65e5\u672c\u8a9e", None),
    ],
)
def test_slugify(title: str, slug: str | None) -> None:
    result = slugify(title)
    if slug is None:
        assert result.startswith("page-")
    else:
        assert result == slug


def test_slugify_fallback_differs_per_title() -> None:
    assert slugify("\u65e5\u672c") != slugify("\u4e2d\u6587")


def test_slugify_bounds_the_length() -> None:
    assert len(slugify("word " * 100)) <= 64
    assert not slugify("a" * 63 + " b").endswith("-")


@given(st.text())
def test_slugify_is_always_safe_and_a_fixed_point(title: str) -> None:
    slug = slugify(title)
    assert SAFE_SLUG.fullmatch(slug)
    assert 0 < len(slug) <= 64
    assert slug not in {".", ".."} and "/" not in slug
    assert slugify(slug) == slug


# -- keys and paths ------------------------------------------------------------------


@pytest.mark.parametrize("key", ["k1", "saga-1:site:3", "A.b_c-d:e", "x" * 200])
def test_valid_keys(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", ".", "..", "a/b", "../x", "a b", "tab\t", "n\u00e9", "x" * 201, "a\nb"])
def test_invalid_keys(key: str) -> None:
    with pytest.raises(InvalidInput):
        check_key(key)


def test_contained_path_refuses_traversal(tmp_path: Path) -> None:
    assert contained_path(tmp_path, "page.md") == (tmp_path / "page.md").resolve()
    assert contained_path(tmp_path, "sub", "page.md") == (tmp_path / "sub" / "page.md").resolve()
    for parts in (("../../etc",), ("..", "etc", "passwd"), ("/etc/passwd",), (".",), ("sub", "..")):
        with pytest.raises(InvalidInput):
            contained_path(tmp_path, *parts)


def test_contained_path_refuses_a_symlink_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "escape.md").symlink_to(outside / "target.md")
    with pytest.raises(InvalidInput):
        contained_path(folder, "escape.md")

"""The web sign-in's pure rules: trusted proxies, origins, form tokens, redirects."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrator.entrypoints.web.rules import (
    check_header_name,
    csrf_key,
    csrf_matches,
    csrf_token,
    first_value,
    is_trusted,
    origin_refusal,
    parse_proxies,
    safe_next,
    site_origin,
)

SITE = "http://127.0.0.1:8080"


def test_proxies_are_addresses_or_cidrs_and_a_bad_entry_is_named() -> None:
    proxies = parse_proxies("10.0.0.0/8, 192.168.1.7 ::1")
    assert len(proxies) == 3
    assert parse_proxies(None) == () and parse_proxies("  ") == ()
    with pytest.raises(ValueError, match="'proxy.example'"):
        parse_proxies("10.0.0.1,proxy.example")


def test_only_a_peer_inside_a_trusted_network_is_trusted() -> None:
    proxies = parse_proxies("10.0.0.0/8,::1")
    assert is_trusted("10.1.2.3", proxies)
    assert is_trusted("::1", proxies)
    assert is_trusted("::ffff:10.0.0.5", proxies)  # an IPv4 peer on a dual-stack socket
    assert not is_trusted("11.0.0.1", proxies)
    assert not is_trusted("127.0.0.1", proxies)
    assert not is_trusted(None, proxies) and not is_trusted("", proxies)
    assert not is_trusted("not-an-address", proxies)
    assert not is_trusted("10.0.0.1", ())


def test_header_names_follow_http_and_compare_lower_case() -> None:
    assert check_header_name("X-Forwarded-User") == "x-forwarded-user"
    for bad in ("", "X Forwarded", "X-User:", "X-\u00e9"):
        with pytest.raises(ValueError):
            check_header_name(bad)


def test_first_forwarded_value() -> None:
    assert first_value("https, http") == "https"
    assert first_value(None) == ""


def test_site_origin_drops_default_ports() -> None:
    assert site_origin("HTTPS", "Review.Example:443") == "https://review.example"
    assert site_origin("http", "127.0.0.1:8080") == SITE
    assert site_origin("http", "[::1]:80") == "http://[::1]"


def test_origin_must_be_this_site() -> None:
    assert origin_refusal(SITE, None, SITE, required=True) is None
    assert origin_refusal("http://127.0.0.1:8080", "https://evil.example/x", SITE, required=True) is None
    for forged in (
        "https://evil.example",
        "null",
        "http://127.0.0.1:8081",
        "http://127.0.0.1:8080.evil.example",
    ):
        assert origin_refusal(forged, None, SITE, required=False), forged


def test_referer_counts_only_without_an_origin() -> None:
    assert origin_refusal(None, f"{SITE}/sagas/abc", SITE, required=True) is None
    assert origin_refusal("", "https://evil.example/page", SITE, required=True)
    assert origin_refusal(None, "http://user@127.0.0.1:8080/", SITE, required=True)
    assert origin_refusal(None, "javascript:alert(1)", SITE, required=True)


def test_neither_header_is_refused_only_when_required() -> None:
    assert origin_refusal(None, None, SITE, required=True)
    assert origin_refusal(None, None, SITE, required=False) is None


def test_form_tokens_are_bound_to_one_session_and_one_key() -> None:
    key = csrf_key(b"signing key")
    assert key != b"signing key"
    token = csrf_token(key, "session:abc")
    assert csrf_matches(key, "session:abc", token)
    assert not csrf_matches(key, "session:abd", token)
    assert not csrf_matches(csrf_key(b"other key"), "session:abc", token)
    assert not csrf_matches(key, "session:abc", "")
    assert not csrf_matches(key, "session:abc", token[:-1] + "\udcff")


def test_next_is_a_local_path_only() -> None:
    assert safe_next("/sagas/abc?x=1") == "/sagas/abc?x=1"
    for bad in (
        None,
        "",
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example",
        "sagas",
        "/a b",
        "/\x00",
    ):
        assert safe_next(bad) == "/", bad


def test_the_rules_load_no_web_framework_database_or_broker() -> None:
    code = (
        "import sys\nimport orchestrator.entrypoints.web.rules\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'starlette', 'sqlalchemy', 'sqlmodel', 'celery', 'redis', 'httpx', 'jinja2'})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""

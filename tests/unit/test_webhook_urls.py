"""Webhook URLs in one spelling, and which addresses a webhook may reach: the pure rules."""

from __future__ import annotations

import ipaddress

import pytest

from orchestrator.core.errors import InvalidInput
from sagas.destinations.registry import normalise_destination
from sagas.destinations.webhook_urls import (
    WebhookAllow,
    address_refusal,
    canonical_url,
    host_refusal,
)

ONE_ENDPOINT = "http://hooks.example.com/in/news"
SIX_SPELLINGS = [
    "http://hooks.example.com/in/news",
    "HTTP://Hooks.Example.COM/in/news",
    "http://hooks.example.com:80/in/news",
    "http://hooks.example.com./in/news",
    "http://hooks.example.com/in/%6Eews",
    "http://hooks.example.com/in/./x/../news",
]


def test_six_spellings_of_one_endpoint_are_one_url() -> None:
    assert {canonical_url(u) for u in SIX_SPELLINGS} == {ONE_ENDPOINT}
    stored = {normalise_destination(f"webhook:{u}") for u in SIX_SPELLINGS}
    assert stored == {f"webhook:{ONE_ENDPOINT}"}


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("https://example.com", "https://example.com/"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://bücher.example/ä", "http://xn--bcher-kva.example/%C3%A4"),
        ("http://example.com/a%2fb", "http://example.com/a%2Fb"),
        ("http://example.com/a%zz", "http://example.com/a%25zz"),
        ("http://example.com/a?q=%7e&r=1", "http://example.com/a?q=~&r=1"),
        ("http://2130706433/h", "http://127.0.0.1/h"),
        ("http://0x7f.1/h", "http://127.0.0.1/h"),
        ("http://127.1/h", "http://127.0.0.1/h"),
        ("http://017700000001/h", "http://127.0.0.1/h"),
        ("http://[::FFFF:127.0.0.1]/h", "http://[::ffff:7f00:1]/h"),
        ("http://[0:0:0:0:0:0:0:1]:8080/h", "http://[::1]:8080/h"),
        ("http://User:p%7ew@Example.com:80/h", "http://User:p~w@example.com/h"),
        ("http://127.0.0.1@Evil.example/h", "http://127.0.0.1@evil.example/h"),
    ],
)
def test_the_canonical_spelling(written: str, canonical: str) -> None:
    assert canonical_url(written) == canonical


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://example.com/h#top", "fragment"),
        ("http://[fe80::1%25eth0]/h", "zone id"),
        ("ftp://example.com/h", "http(s)"),
        ("http://example.com:99999/h", "not a URL"),
        ("http://256.1.1.1.1/h", "neither a name nor an IPv4"),
        ("http://1.2.3.256/h", "neither a name nor an IPv4"),
        ("http://exa..mple.com/h", "empty label"),
    ],
)
def test_urls_that_cannot_be_one_destination_are_refused_naming_it(url: str, said: str) -> None:
    with pytest.raises(InvalidInput, match=said) as caught:
        canonical_url(url)
    assert url in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("100.64.0.1", "private"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("233.1.1.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("2002:7f00:1::", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("::7f00:1", "loopback"),
    ],
)
def test_non_public_addresses_are_named_for_what_they_are(address: str, why: str) -> None:
    reason = address_refusal(ipaddress.ip_address(address))
    assert reason is not None and why in reason


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


def ips(*texts: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    return [ipaddress.ip_address(t) for t in texts]


def test_every_resolved_address_must_be_public_or_allowed() -> None:
    nothing = WebhookAllow()
    assert host_refusal("example.com", ips("93.184.216.34"), nothing) is None
    mixed = host_refusal("example.com", ips("93.184.216.34", "10.0.0.7"), nothing)
    assert mixed is not None and "10.0.0.7" in mixed and "PRESSROOM_WEBHOOK_ALLOW" in mixed
    assert host_refusal("example.com", [], nothing) == "example.com resolves to no address"


def test_the_allow_list_names_hosts_addresses_and_ranges() -> None:
    allow = WebhookAllow.parse("127.0.0.1, Hooks.Internal. 10.0.0.0/8 [::1]")
    assert allow.names == frozenset({"hooks.internal"})
    assert host_refusal("127.0.0.1", ips("127.0.0.1"), allow) is None
    assert host_refusal("::ffff:7f00:1", ips("::ffff:127.0.0.1"), allow) is None, "the address it carries"
    assert host_refusal("hooks.internal", ips("192.168.9.9"), allow) is None, "named: whatever it resolves to"
    assert host_refusal("db.internal", ips("10.9.8.7"), allow) is None, "in the range"
    assert host_refusal("::1", ips("::1"), allow) is None
    localhost = host_refusal("localhost", ips("127.0.0.1", "::2"), allow)
    assert localhost is not None and "::2" in localhost, "one address outside the list refuses the host"
    assert host_refusal("meta", ips("169.254.169.254"), allow) is not None


@pytest.mark.parametrize("entry", ["http://x/", "a b/c", "user@host"])
def test_a_bad_allow_entry_is_named(entry: str) -> None:
    with pytest.raises(ValueError, match="not a host name"):
        WebhookAllow.parse(entry)

"""Webhook URLs and the hosts they may reach: pure rules, no I/O.

- `canonical_url(url)`: the one spelling of a webhook URL that a saga stores,
  so one endpoint is one destination. Scheme and host lower-case, the host's
  IDNA A-label form with no trailing dot, an IPv4 host written the way a
  resolver reads it (`2130706433`, `0x7f.1` and `127.1` are `127.0.0.1`), an
  IPv6 host compressed, the default port dropped, dot segments removed,
  `%`-escapes of unreserved characters decoded and the others upper-case, an
  empty path `/`; user info is kept. A fragment or a zone id is refused.
- `WebhookAllow`: `PRESSROOM_WEBHOOK_ALLOW` parsed: host names, addresses and
  CIDR ranges that may be reached although they are not public.
- `address_refusal(address)`: why an address is not a public one (loopback,
  private, link-local, metadata, unspecified, multicast, reserved), or None.
  An IPv6 address carrying an IPv4 one (mapped, compatible, 6to4, NAT64) is
  judged by the IPv4 address it carries.
- `host_refusal(host, addresses, allow)`: why a host resolved to `addresses`
  may not be called, or None. Every address must be public or allowed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import idna

from orchestrator.core.errors import InvalidInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = {"http": 80, "https": 443}
METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")
_COMPATIBLE = ipaddress.ip_network("::/96")
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _bad(url: str, why: str) -> InvalidInput:
    return InvalidInput(f"webhook:{url}: {why}", target=url)


# -- canonical URLs ------------------------------------------------------------


def canonical_url(url: str) -> str:
    """The one spelling of `url`; `InvalidInput` naming the URL when it cannot be one."""
    if "#" in url:
        raise _bad(url, "a fragment (#…) is never sent to the receiver; remove it")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise _bad(url, f"not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise _bad(url, "needs an http(s) URL with a host, as in webhook:https://host/path")
    userinfo, _, hostport = parts.netloc.rpartition("@")
    host = canonical_host(_raw_host(hostport), url)
    shown = f"[{host}]" if ":" in host else host
    if userinfo:  # kept as written (escapes normalised): credentials the receiver checks
        shown = f"{_normal_escapes(userinfo, _PATH_SAFE.replace('/', '').replace('@', ''))}@{shown}"
    if port is not None and port != DEFAULT_PORTS[scheme]:
        shown += f":{port}"
    path = _normal_escapes(_without_dot_segments(parts.path or "/"), _PATH_SAFE)
    query = _normal_escapes(parts.query, _QUERY_SAFE)
    return f"{scheme}://{shown}{path}" + (f"?{query}" if query else "")


def _raw_host(netloc: str) -> str:
    """The host as written (case kept, brackets removed), without the port."""
    if netloc.startswith("["):
        return netloc[1 : netloc.index("]")] if "]" in netloc else netloc[1:]
    return netloc.rsplit(":", 1)[0] if ":" in netloc else netloc


def canonical_host(host: str, url: str = "") -> str:
    """A host name lower-case in its IDNA A-label form with no trailing dot, or an address."""
    where = url or host
    if ":" in host:  # only an IPv6 literal holds a colon here
        if "%" in host:
            raise _bad(where, "an IPv6 zone id (%…) is not supported")
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            raise _bad(where, f"{host!r} is not an IPv6 address") from None
    if "%" in host:
        raise _bad(where, f"the host {host!r} holds a %-escape")
    name = host[:-1] if host.endswith(".") else host
    if not name or any(not label for label in name.split(".")):
        raise _bad(where, f"the host {host!r} has an empty label")
    if _ends_in_number(name):
        v4 = _ipv4(name)
        if v4 is None:
            raise _bad(where, f"the host {host!r} is neither a name nor an IPv4 address")
        return str(v4)
    try:
        return idna.encode(name, uts46=True).decode("ascii").lower()
    except idna.IDNAError as exc:
        raise _bad(where, f"the host {host!r} is not a valid name ({exc})") from None


def _ends_in_number(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return last.isdigit() or bool(re.fullmatch(r"0x[0-9a-f]*", last))


def _ipv4(name: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a resolver reads in `name` (inet_aton / WHATWG forms), else None."""
    labels = name.split(".")
    if len(labels) > 4:
        return None
    numbers: list[int] = []
    for label in labels:
        low = label.lower()
        try:
            if low.startswith("0x"):
                numbers.append(int(low[2:] or "0", 16))
            elif len(low) > 1 and low.startswith("0"):
                numbers.append(int(low, 8))
            else:
                numbers.append(int(low, 10))
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _without_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path: `/a/./b/../c` is `/a/c`."""
    out: list[str] = []
    segments = path.split("/")[1:] if path.startswith("/") else path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg in (".", "%2e", "%2E"):
            if last:
                out.append("")
        elif seg.lower() in ("..", ".%2e", "%2e.", "%2e%2e"):
            if out:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def _normal_escapes(text: str, safe: str) -> str:
    """Unreserved characters decoded, other escapes upper-case, the rest escaped once."""
    out: list[str] = []
    i = 0
    while i < len(text):
        match = _ESCAPE.match(text, i)
        if match:
            char = chr(int(match.group(1), 16))
            out.append(char if char in _UNRESERVED else "%" + match.group(1).upper())
            i += 3
            continue
        out.append(quote(text[i], safe=safe))
        i += 1
    return "".join(out)


# -- which hosts may be called ---------------------------------------------------


@dataclass(frozen=True)
class WebhookAllow:
    """`PRESSROOM_WEBHOOK_ALLOW`: names and networks a webhook may reach though not public."""

    names: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> WebhookAllow:
        """From the setting's text (commas or spaces); `ValueError` naming a bad entry."""
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for item in (text or "").replace(",", " ").split():
            bare = item[1:-1] if item.startswith("[") and item.endswith("]") else item
            try:
                networks.append(ipaddress.ip_network(bare, strict=False))
                continue
            except ValueError:
                pass
            try:
                names.add(canonical_host(bare))
            except InvalidInput:
                raise ValueError(f"not a host name, address or CIDR range: {item!r}") from None
        return cls(frozenset(names), tuple(networks))

    def covers(self, address: IPAddress) -> bool:
        embedded = embedded_ipv4(address)
        return any(
            a in net
            for net in self.networks
            for a in (address, embedded)
            if a is not None and a.version == net.version
        )

    def __str__(self) -> str:
        return ", ".join([*sorted(self.names), *map(str, self.networks)]) or "nothing"


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, 6to4, NAT64), else None."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: IPAddress) -> str | None:
    """Why `address` is not a public unicast address, or None when it is."""
    carried = embedded_ipv4(address)
    if carried is not None:
        why = address_refusal(carried)
        return f"{why} (carried in {address})" if why else None
    checks: Sequence[tuple[bool, str]] = (
        (address in METADATA, "a cloud metadata address"),
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (isinstance(address, ipaddress.IPv4Address) and address in _SHARED, "private (shared, RFC 6598)"),
        (isinstance(address, ipaddress.IPv4Address) and address in _THIS_NETWORK, "reserved"),
        (address.is_reserved, "reserved"),
        (address.is_private, "private"),
        (not address.is_global, "not a public address"),
    )
    return next((why for hit, why in checks if hit), None)


def host_refusal(host: str, addresses: Iterable[IPAddress], allow: WebhookAllow) -> str | None:
    """Why `host`, resolved to `addresses`, may not be called; None when it may."""
    if host in allow.names:
        return None
    seen = list(addresses)
    if not seen:
        return f"{host} resolves to no address"
    for address in seen:
        why = address_refusal(address)
        if why is not None and not allow.covers(address):
            named = "" if str(address) == host else f"{host} resolves to "
            return f"{named}{address}, {why}; not in PRESSROOM_WEBHOOK_ALLOW"
    return None


__all__ = [
    "DEFAULT_PORTS",
    "IPAddress",
    "METADATA",
    "WebhookAllow",
    "address_refusal",
    "canonical_host",
    "canonical_url",
    "embedded_ipv4",
    "host_refusal",
]

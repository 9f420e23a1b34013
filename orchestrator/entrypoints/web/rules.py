"""The web sign-in's rules, pure: trusted proxies, origins, CSRF tokens, redirects. No I/O.

- `parse_proxies(text)`: `PRESSROOM_TRUSTED_PROXIES` (addresses or CIDRs,
  separated by commas or spaces) as networks; `ValueError` on a bad entry.
- `is_trusted(peer, proxies)`: whether the socket peer is one of them. Only a
  trusted peer's `X-Forwarded-Proto`, `X-Forwarded-Host` and user header count.
- `origin_refusal(...)`: why a form POST's `Origin` (or, without one, its
  `Referer`) is not this site, or None. A request naming neither is refused
  when `required` (closed mode); in open mode the per-process form token is
  what guards it, as before sign-in existed.
- `csrf_token(key, binding)` / `csrf_matches(...)`: the form token bound to
  one session (HMAC-SHA256 of the session's reference under a key derived
  from the signing key), compared in constant time.
- `safe_next(path)`: where to go after signing in: a path on this site only.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from orchestrator.core.errors import (
    IllegalTransition,
    InvalidInput,
    NotPermitted,
    PressroomError,
    SelfApproval,
    ServiceUnavailable,
    StaleVersion,
)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# RFC 9110 field-name characters; what PRESSROOM_TRUSTED_PROXY_HEADER may be.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")


def parse_proxies(text: str | None) -> tuple[Network, ...]:
    """Addresses and CIDRs separated by commas or white space; ValueError names a bad one."""
    networks: list[Network] = []
    for item in (text or "").replace(",", " ").split():
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"not an IP address or CIDR: {item!r}") from None
    return tuple(networks)


def check_header_name(name: str) -> str:
    """A header name as HTTP spells them, lower-cased; ValueError otherwise."""
    if not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"not an HTTP header name: {name!r}")
    return name.lower()


def is_trusted(peer: str | None, proxies: Iterable[Network]) -> bool:
    if not peer:
        return False
    try:
        address = ipaddress.ip_address(peer.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address.version == net.version and address in net for net in proxies)


def first_value(header: str | None) -> str:
    """The first (client-most) entry of a comma-separated forwarded header, trimmed."""
    return (header or "").split(",", 1)[0].strip()


def site_origin(scheme: str, host: str) -> str:
    """`scheme://host[:port]` as a browser writes it in `Origin` (default ports dropped)."""
    scheme = scheme.lower()
    host = host.strip().lower()
    default = {"http": ":80", "https": ":443"}.get(scheme)
    if default and host.endswith(default) and not host.endswith("]"):
        host = host[: -len(default)]
    return f"{scheme}://{host}"


def _origin_of(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
        return None
    return site_origin(parts.scheme, parts.netloc)


def origin_refusal(origin: str | None, referer: str | None, expected: str, *, required: bool) -> str | None:
    """Why this form POST does not come from `expected`, or None when it does."""
    if origin is not None and origin.strip():
        sent = origin.strip()
        if sent.lower() == "null" or _origin_of(sent) != expected:
            return (
                f"the form was sent from another site ({sent[:100]}); forms are accepted only from this one"
            )
        return None
    if referer is not None and referer.strip():
        if _origin_of(referer.strip()) != expected:
            return "the form was sent from another site; forms are accepted only from this one"
        return None
    if required:
        return "the form names no Origin or Referer; reload the page and send it from this site"
    return None


def csrf_key(signing_key: bytes) -> bytes:
    """The key form tokens are made with, derived from (never equal to) the signing key."""
    return hmac.new(signing_key, b"pressroom web form token v1", hashlib.sha256).digest()


def csrf_token(key: bytes, binding: str) -> str:
    """The form token for one session (`binding` names it; never the cookie value itself)."""
    return hmac.new(key, binding.encode("utf-8"), hashlib.sha256).hexdigest()


def csrf_matches(key: bytes, binding: str, sent: str) -> bool:
    return hmac.compare_digest(csrf_token(key, binding).encode(), sent.encode("utf-8", "replace"))


def safe_next(path: str | None) -> str:
    """A local path to return to after signing in; anything else is `/`."""
    path = (path or "").strip()
    if not path.startswith("/") or path.startswith("//") or "\\" in path or any(ord(c) < 33 for c in path):
        return "/"
    if urlsplit(path).netloc or len(path) > 2000:
        return "/"
    return path


# What a person reads before a refusal's reason, most specific first (never a class name).
PROBLEMS: tuple[tuple[type[PressroomError], str], ...] = (
    (SelfApproval, "Not yours to approve"),
    (StaleVersion, "Out of date"),
    (NotPermitted, "Not permitted"),
    (IllegalTransition, "Not possible now"),
    (InvalidInput, "Check the form"),
    (ServiceUnavailable, "Try again shortly"),
)


def problem(error: PressroomError) -> str:
    return next((label for kind, label in PROBLEMS if isinstance(error, kind)), "Refused")


__all__ = [
    "problem",
    "Network",
    "check_header_name",
    "csrf_key",
    "csrf_matches",
    "csrf_token",
    "first_value",
    "is_trusted",
    "origin_refusal",
    "parse_proxies",
    "safe_next",
    "site_origin",
]

"""The form of the host list settings. Pure: no I/O.

`PRESSROOM_WEBHOOK_ALLOW`: one rule for both readers of the setting: `Settings`
refuses a bad list at start (exit 2), and the CLI's quick read path
(`orchestrator.light_config`), which must never accept what `Settings` would
refuse, checks it the same way. `sagas.destinations.webhook_urls.WebhookAllow.parse`
reads the accepted list.

`PRESSROOM_MCP_ALLOWED_ORIGINS`: `origin_list` reads it, for `Settings` (which
refuses a bad one at start) and for the MCP server's Host and Origin checks.
Each entry is an origin, `http(s)://HOST[:PORT]` or `http(s)://HOST:*` (any
port), and gives both what a browser sends as `Origin` and what a client of
that URL sends as `Host`; a default port is dropped from both, as clients do.
"""

from __future__ import annotations

import ipaddress
import re

_HOST = re.compile(r"[^\s/\\@%#?:\[\]]+")


def check_webhook_allow(value: str | None) -> None:
    """Host names, addresses or CIDR ranges, commas or spaces apart; ValueError names a bad one."""
    for item in (value or "").replace(",", " ").split():
        try:
            ipaddress.ip_network(item.strip("[]"), strict=False)
        except ValueError:
            if not _HOST.fullmatch(item):
                raise ValueError(f"not a host name, address or CIDR range: {item!r}") from None


_ORIGIN = re.compile(r"(https?)://([a-z0-9.-]+|\[[0-9a-f:.]+\])(?::(\d{1,5}|\*))?/?")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _origin_parts_ok(scheme: str, host: str, port: str | None) -> bool:
    if port not in (None, "*") and not 0 < int(port) < 65536:
        return False
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    return all(host.split("."))  # no empty label: not ".", "a..b" or ".a"


def origin_list(value: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(origins, hosts) of an origin list, commas or spaces apart, in the form the MCP SDK's
    transport security settings take (`:*` for any port); ValueError names a bad entry."""
    origins: list[str] = []
    hosts: list[str] = []
    for item in (value or "").replace(",", " ").split():
        found = _ORIGIN.fullmatch(item.lower())
        if found is None or not _origin_parts_ok(*found.groups()):
            raise ValueError(f"not an origin (http(s)://HOST[:PORT], or :* for any port): {item!r}")
        scheme, host, port = found.groups()
        authority = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
        origins.append(f"{scheme}://{authority}")
        hosts.append(authority)
    return tuple(dict.fromkeys(origins)), tuple(dict.fromkeys(hosts))


__all__ = ["check_webhook_allow", "origin_list"]

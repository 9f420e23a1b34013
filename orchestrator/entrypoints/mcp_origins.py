"""Which `Host` and `Origin` headers `pressroom mcp --transport http` serves, on every bind.

A DNS-rebinding page makes a browser send requests to the server under a name
the attacker controls (its `Host`) from the attacker's page (its `Origin`).
The server serves only:

- `Host`: a loopback name or address with any port (`127.0.0.1:*`,
  `localhost:*`, `[::1]:*`); the address it is bound to, when that is one
  address or name rather than all of them (`0.0.0.0`, `::`); and the host
  of each origin in `PRESSROOM_MCP_ALLOWED_ORIGINS`;
- `Origin`: none (clients that are not browsers send none), a loopback
  origin with any port, or one `PRESSROOM_MCP_ALLOWED_ORIGINS` names.

So a server bound to every address without the setting answers only
clients that reach it through a loopback name (a proxy on the same machine);
every other `Host` gets 421 and every foreign `Origin` 403, before the
bearer token is read. The check is the SDK's own (`TransportSecuritySettings`),
run by `HostAndOrigin` ahead of authentication and again by the SDK's
transport.
"""

from __future__ import annotations

import ipaddress

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.core.host_lists import origin_list

LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
EVERY_ADDRESS = frozenset({"", "0.0.0.0", "::", "[::]"})


def bound_host(host: str) -> str | None:
    """The `Host` pattern of the bound address (any port), or None when it is every address."""
    if host in EVERY_ADDRESS:
        return None
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return f"{host.lower()}:*"
    return f"[{address.compressed}]:*" if address.version == 6 else f"{address.compressed}:*"


def transport_security(host: str, allowed_origins: str | None) -> TransportSecuritySettings:
    """What the server bound to `host` serves, with `PRESSROOM_MCP_ALLOWED_ORIGINS`."""
    origins, origin_hosts = origin_list(allowed_origins)
    bound = bound_host(host)
    hosts = [*LOOPBACK_HOSTS, *([bound] if bound else []), *origin_hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys([*LOOPBACK_ORIGINS, *origins])),
    )


class HostAndOrigin:
    """ASGI: a request whose `Host` or `Origin` the settings do not allow is refused before
    anything else reads it (421 for the Host, 403 for the Origin)."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings) -> None:
        self.app = app
        self.check = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self.check.validate_request(Request(scope, receive), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["HostAndOrigin", "bound_host", "transport_security"]

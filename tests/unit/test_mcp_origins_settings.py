"""`PRESSROOM_MCP_ALLOWED_ORIGINS` and what the MCP server over HTTP serves for each bind,
without a server: the list's form, and the Host and Origin patterns handed to the SDK."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.core.config import Settings
from orchestrator.core.host_lists import origin_list
from orchestrator.entrypoints.mcp_origins import LOOPBACK_HOSTS, LOOPBACK_ORIGINS, transport_security


def test_each_origin_gives_the_origin_a_browser_sends_and_the_host_a_client_of_its_url_sends() -> None:
    origins, hosts = origin_list(
        "https://MCP.example.com, http://10.0.4.20:8765 https://a.example:443/ http://[::1]:*"
    )
    assert origins == (
        "https://mcp.example.com",
        "http://10.0.4.20:8765",
        "https://a.example",
        "http://[::1]:*",
    )
    assert hosts == ("mcp.example.com", "10.0.4.20:8765", "a.example", "[::1]:*")
    assert origin_list(None) == origin_list("") == ((), ())


@pytest.mark.parametrize(
    "value",
    [
        "*",
        "https://*",
        "null",
        "mcp.example.com",
        "https://mcp.example.com/mcp",
        "https://user@mcp.example.com",
        "ftp://mcp.example.com",
        "https://mcp.example.com:0",
        "https://mcp.example.com:65536",
        "https://a..example",
        "https://[::::1]",
    ],
)
def test_anything_but_an_origin_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValidationError, match="not an origin") as refused:
        Settings(mcp_allowed_origins=f"https://fine.example {value}")
    assert repr(value) in str(refused.value)


def test_every_bind_checks_host_and_origin_and_only_a_single_bound_address_joins_the_hosts() -> None:
    for host in ("127.0.0.1", "0.0.0.0", "::", "10.0.4.20", "2001:db8::7", "mcp.internal"):
        served = transport_security(host, None)
        assert served.enable_dns_rebinding_protection, host
        assert served.allowed_origins == list(LOOPBACK_ORIGINS), host
    assert transport_security("0.0.0.0", None).allowed_hosts == list(LOOPBACK_HOSTS)
    assert transport_security("::", None).allowed_hosts == list(LOOPBACK_HOSTS)
    assert transport_security("10.0.4.20", None).allowed_hosts == [*LOOPBACK_HOSTS, "10.0.4.20:*"]
    assert transport_security("2001:db8::7", None).allowed_hosts == [*LOOPBACK_HOSTS, "[2001:db8::7]:*"]
    listed = transport_security("0.0.0.0", "https://mcp.example.com http://10.0.4.20:*")
    assert listed.allowed_hosts == [*LOOPBACK_HOSTS, "mcp.example.com", "10.0.4.20:*"]
    assert listed.allowed_origins == [*LOOPBACK_ORIGINS, "https://mcp.example.com", "http://10.0.4.20:*"]

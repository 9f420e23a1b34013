"""The form of a host list setting (`PRESSROOM_WEBHOOK_ALLOW`). Pure: no I/O.

One rule for both readers of the setting: `Settings` refuses a bad list at
start (exit 2), and the CLI's quick read path (`orchestrator.light_config`),
which must never accept what `Settings` would refuse, checks it the same way.
`sagas.destinations.webhook_urls.WebhookAllow.parse` reads the accepted list.
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


__all__ = ["check_webhook_allow"]

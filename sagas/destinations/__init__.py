"""Destinations: the `Destination` port, its adapters and the URI registry.

`base` (the port and its values) loads eagerly; the registry and the
adapters load on first use, so that pure modules importing
`sagas.destinations.base` do not pull in HTTP or subprocess machinery.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from sagas.destinations.base import Destination, PublishedVersion, StatusAnswer

if TYPE_CHECKING:
    from sagas.destinations.git import GitDestination
    from sagas.destinations.memory import MemoryDestination, MemoryStore, memory_store, reset_memory_stores
    from sagas.destinations.registry import known_forms, open_destination, parse_destination
    from sagas.destinations.site import SiteDestination
    from sagas.destinations.slugs import check_key, slugify
    from sagas.destinations.webhook import WebhookDestination

_LAZY = {
    "GitDestination": "git",
    "MemoryDestination": "memory",
    "MemoryStore": "memory",
    "memory_store": "memory",
    "reset_memory_stores": "memory",
    "known_forms": "registry",
    "open_destination": "registry",
    "parse_destination": "registry",
    "SiteDestination": "site",
    "check_key": "slugs",
    "slugify": "slugs",
    "WebhookDestination": "webhook",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = [
    "Destination",
    "GitDestination",
    "MemoryDestination",
    "MemoryStore",
    "PublishedVersion",
    "SiteDestination",
    "StatusAnswer",
    "WebhookDestination",
    "check_key",
    "known_forms",
    "memory_store",
    "open_destination",
    "parse_destination",
    "reset_memory_stores",
    "slugify",
]

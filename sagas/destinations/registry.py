"""Destination URIs: parse them, refuse unknown ones with a hint, open adapters.

A new destination is one module plus one line in `_KINDS`. Each kind is a
class with a `form` (how its URI is written, shown in hints), a
`check_target(target)` that raises `InvalidInput`, and an
`open(target, *, uri, timeout)` that builds the adapter. Parsing does no I/O.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from orchestrator.errors import InvalidInput
from sagas.destinations.base import Destination
from sagas.destinations.git import GitDestination
from sagas.destinations.memory import MemoryDestination
from sagas.destinations.site import SiteDestination
from sagas.destinations.slugs import check_key, contained_path, slugify
from sagas.destinations.webhook import WebhookDestination


class DestinationKind(Protocol):
    """What the registry needs from a destination class."""

    form: ClassVar[str]

    @classmethod
    def check_target(cls, target: str) -> None: ...

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float) -> Destination: ...


_KINDS: dict[str, type[DestinationKind]] = {
    "site": SiteDestination,
    "git": GitDestination,
    "webhook": WebhookDestination,
    "memory": MemoryDestination,
}


def known_forms() -> list[str]:
    """How each known destination URI is written, e.g. `site:PATH`."""
    return [kind.form for kind in _KINDS.values()]


def _hint() -> str:
    return "known destinations: " + ", ".join(known_forms())


def parse_destination(uri: str) -> tuple[str, str]:
    """Split `uri` into `(scheme, target)` and check the target; `InvalidInput` if malformed."""
    scheme, sep, target = uri.partition(":")
    if not sep or not scheme:
        raise InvalidInput(f"destination {uri!r} has no scheme; {_hint()}", uri=uri)
    kind = _KINDS.get(scheme)
    if kind is None:
        raise InvalidInput(f"unknown destination scheme {scheme!r} in {uri!r}; {_hint()}", uri=uri)
    if not target.strip():
        raise InvalidInput(f"destination {uri!r} has an empty target; write it as {kind.form}", uri=uri)
    kind.check_target(target)
    return scheme, target


def open_destination(uri: str, *, timeout: float, link_hosts: frozenset[str] = frozenset()) -> Destination:
    """The adapter for `uri`; `timeout` bounds each call that can hang (seconds);
    `link_hosts` are the hosts a rendered `site:` page may link to."""
    if timeout <= 0:
        raise InvalidInput(f"destination timeout must be positive, got {timeout}", uri=uri)
    scheme, target = parse_destination(uri)
    if scheme == "site":
        return SiteDestination.open(target, uri=uri, timeout=timeout, link_hosts=link_hosts)
    return _KINDS[scheme].open(target, uri=uri, timeout=timeout)


__all__ = [
    "DestinationKind",
    "check_key",
    "contained_path",
    "known_forms",
    "open_destination",
    "parse_destination",
    "slugify",
]

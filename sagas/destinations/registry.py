"""Destination URIs: parse them, refuse unknown ones with a hint, open adapters.

A new destination is one module plus one line in `_KINDS` (its module loads
on first use). Each kind is a
class with a `form` (how its URI is written, shown in hints), a
`check_target(target)` that raises `InvalidInput`, and an
`open(target, *, uri, timeout)` that builds the adapter. Parsing does no I/O.
"""

from __future__ import annotations

from importlib import import_module
from typing import ClassVar, Protocol, cast

from orchestrator.errors import InvalidInput
from sagas.destinations.base import Destination
from sagas.destinations.slugs import check_key, contained_path, slugify


class DestinationKind(Protocol):
    """What the registry needs from a destination class."""

    form: ClassVar[str]

    @classmethod
    def check_target(cls, target: str) -> None: ...

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float) -> Destination: ...


# scheme -> (module, class): an adapter's module (and its HTTP or markdown stack)
# loads when a URI of its scheme is first parsed or opened, not with the registry.
_KINDS: dict[str, tuple[str, str]] = {
    "site": ("sagas.destinations.site", "SiteDestination"),
    "git": ("sagas.destinations.git", "GitDestination"),
    "webhook": ("sagas.destinations.webhook", "WebhookDestination"),
    "memory": ("sagas.destinations.memory", "MemoryDestination"),
}


def _kind(scheme: str) -> type[DestinationKind] | None:
    entry = _KINDS.get(scheme)
    if entry is None:
        return None
    module, name = entry
    return cast(type[DestinationKind], getattr(import_module(module), name))


def known_forms() -> list[str]:
    """How each known destination URI is written, e.g. `site:PATH`."""
    return [kind.form for kind in map(_kind, _KINDS) if kind is not None]


def _hint() -> str:
    return "known destinations: " + ", ".join(known_forms())


def parse_destination(uri: str) -> tuple[str, str]:
    """Split `uri` into `(scheme, target)` and check the target; `InvalidInput` if malformed."""
    scheme, sep, target = uri.partition(":")
    if not sep or not scheme:
        raise InvalidInput(f"destination {uri!r} has no scheme; {_hint()}", uri=uri)
    kind = _kind(scheme)
    if kind is None:
        raise InvalidInput(f"unknown destination scheme {scheme!r} in {uri!r}; {_hint()}", uri=uri)
    if not target.strip():
        raise InvalidInput(f"destination {uri!r} has an empty target; write it as {kind.form}", uri=uri)
    kind.check_target(target)
    return scheme, target


def open_destination(uri: str, *, timeout: float) -> Destination:
    """The adapter for `uri`; `timeout` bounds each call that can hang (seconds)."""
    if timeout <= 0:
        raise InvalidInput(f"destination timeout must be positive, got {timeout}", uri=uri)
    scheme, target = parse_destination(uri)
    kind = _kind(scheme)
    assert kind is not None  # parse_destination refused unknown schemes
    return kind.open(target, uri=uri, timeout=timeout)


__all__ = [
    "DestinationKind",
    "check_key",
    "contained_path",
    "known_forms",
    "open_destination",
    "parse_destination",
    "slugify",
]

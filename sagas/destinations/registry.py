"""Destination URIs: parse them, refuse unknown ones with a hint, open adapters.

A new destination is one module plus one line in `_KINDS` (its module loads
on first use). Each kind is a
class with a `form` (how its URI is written, shown in hints), a
`check_target(target)` that raises `InvalidInput`, and an
`open(target, *, uri, timeout)` that builds the adapter. Parsing does no I/O.

`normalise_destination` gives each destination one spelling at submit: a
`site:`/`git:` path made absolute and normal (`/x`, `//x/` and `/./x` are one
folder), a `webhook:` URL canonical (`webhook_urls.canonical_url`: case,
default port, IDNA, trailing dot, %-escapes, numeric IPv4 spellings; a
fragment refused), control and invisible format characters refused, and `memory:`
refused unless the caller enabled it (tests, `pressroom eval`: see
`bootstrap.build_app(memory_destinations=True)`; no setting turns it on).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from orchestrator.core.errors import InvalidInput
from sagas.destinations.base import Destination
from sagas.destinations.slugs import check_key, contained_path, slugify

if TYPE_CHECKING:
    from sagas.destinations.webhook_urls import WebhookAllow


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


_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp"})
FILE_SCHEMES = ("site", "git")


def normalise_destination(uri: str, *, allow_memory: bool = False) -> str:
    """The one spelling of `uri` a saga stores; `InvalidInput` when it is not acceptable."""
    bad = next((ch for ch in uri if unicodedata.category(ch) in _INVISIBLE), None)
    if bad is not None:
        raise InvalidInput(f"destination {uri!r} holds a control character (U+{ord(bad):04X})", uri=uri)
    scheme, target = parse_destination(uri)
    if scheme == "memory" and not allow_memory:
        raise InvalidInput(
            f"{uri!r}: memory: destinations exist for tests only; use site:PATH, git:PATH or webhook:URL",
            uri=uri,
        )
    if scheme == "webhook":
        from sagas.destinations.webhook_urls import canonical_url

        return f"webhook:{canonical_url(target)}"
    if scheme not in FILE_SCHEMES:
        return f"{scheme}:{target}"
    path = os.path.expanduser(target)
    if ".." in PurePosixPath(path).parts:
        raise InvalidInput(f"destination path must not contain '..': {uri}", uri=uri)
    path = os.path.abspath(path)
    if path.startswith("//"):  # POSIX keeps a leading '//' apart; here it is just '/'
        path = "/" + path.lstrip("/")
    return f"{scheme}:{path}"


def open_destination(
    uri: str,
    *,
    timeout: float,
    link_hosts: frozenset[str] = frozenset(),
    webhook_allow: WebhookAllow | None = None,
    roots: Sequence[Path] = (),
) -> Destination:
    """The adapter for `uri`; `timeout` bounds each call that can hang (seconds);
    `link_hosts` are the hosts a rendered `site:` page may link to; `webhook_allow`
    the non-public hosts a `webhook:` may reach (`PRESSROOM_WEBHOOK_ALLOW`; none when omitted);
    `roots` the folders a `site:` folder must lie in at the effect (`PRESSROOM_ALLOWED_ROOTS`)."""
    if timeout <= 0:
        raise InvalidInput(f"destination timeout must be positive, got {timeout}", uri=uri)
    scheme, target = parse_destination(uri)
    kind = _kind(scheme)
    assert kind is not None  # parse_destination refused unknown schemes
    if scheme == "site":
        site: Any = kind
        return cast(
            Destination, site.open(target, uri=uri, timeout=timeout, link_hosts=link_hosts, roots=roots)
        )
    if scheme == "webhook":
        hook: Any = kind
        return cast(Destination, hook.open(target, uri=uri, timeout=timeout, allow=webhook_allow))
    return kind.open(target, uri=uri, timeout=timeout)


__all__ = [
    "DestinationKind",
    "check_key",
    "contained_path",
    "known_forms",
    "normalise_destination",
    "open_destination",
    "parse_destination",
    "slugify",
]

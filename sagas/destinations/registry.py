"""Destination URIs: parse them, refuse unknown ones with a hint, open adapters.

A new destination is one module plus one line in `_KINDS` (its module loads
on first use). Each kind is a class (`DestinationKind`) that says how its URI is
written (`form`, shown in hints), whether its target is a folder under the
allowed roots (`file_based`), whether its publish can be undone (`reversible`)
and whether it exists for tests only (`test_only`); it checks a target
(`check_target`, `InvalidInput`), spells it one way (`canonical`), checks it
against the operator's settings at submit (`check_at_submit`) and builds the
adapter (`open`). Callers ask the registry (`is_file_based`, `is_reversible`,
`check_at_submit`), never a scheme by name. Parsing does no I/O.

`normalise_destination` gives each destination one spelling at submit: a
`site:`/`git:` path made absolute and normal (`/x`, `//x/` and `/./x` are one
folder), a `webhook:` URL canonical (`webhook_urls.canonical_url`: case,
default port, IDNA, trailing dot, %-escapes, numeric IPv4 spellings; a
fragment refused), an `email:` recipient list as written (checked, one address
each), control and invisible format characters refused, and `memory:`
refused unless the caller enabled it (tests, `pressroom eval`: see
`bootstrap.build_app(memory_destinations=True)`; no setting turns it on).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, ClassVar, Protocol, cast

from orchestrator.core.errors import InvalidInput
from sagas.destinations.base import Destination, OpenOptions
from sagas.destinations.slugs import check_key, contained_path, slugify

if TYPE_CHECKING:
    from orchestrator.core.config import Settings
    from sagas.destinations.webhook_urls import WebhookAllow


class DestinationKind(Protocol):
    """What the registry needs from a destination class.

    `file_based`: its target is a folder path, stored absolute and normal, that must
    lie in `PRESSROOM_ALLOWED_ROOTS` at submit and at the effect. `reversible`: its
    compensation undoes the publish; an irreversible kind's publish runs only after
    every reversible step of its saga succeeded, and its compensation is a correction.
    `test_only`: refused at submit unless the caller enabled it (`memory:`).
    """

    form: ClassVar[str]
    file_based: ClassVar[bool]
    reversible: ClassVar[bool]
    test_only: ClassVar[bool]

    @classmethod
    def check_target(cls, target: str) -> None: ...

    @classmethod
    def canonical(cls, target: str) -> str:
        """The target's one stored spelling (a file-based kind's path is the registry's to normalise)."""
        ...

    @classmethod
    def check_at_submit(cls, target: str, settings: Settings) -> None:
        """What the operator's settings refuse about `target` now; `InvalidInput` naming it."""
        ...

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float, options: OpenOptions) -> Destination: ...


# scheme -> (module, class): an adapter's module (and its HTTP or markdown stack)
# loads when a URI of its scheme is first parsed or opened, not with the registry.
_KINDS: dict[str, tuple[str, str]] = {
    "site": ("sagas.destinations.site", "SiteDestination"),
    "git": ("sagas.destinations.git", "GitDestination"),
    "webhook": ("sagas.destinations.webhook", "WebhookDestination"),
    "email": ("sagas.destinations.email", "EmailDestination"),
    "memory": ("sagas.destinations.memory", "MemoryDestination"),
}


def _kind(scheme: str) -> type[DestinationKind] | None:
    entry = _KINDS.get(scheme)
    if entry is None:
        return None
    module, name = entry
    return cast(type[DestinationKind], getattr(import_module(module), name))


def kind_of(uri: str) -> type[DestinationKind] | None:
    """The class of `uri`'s scheme; None for an unknown scheme (nothing is checked)."""
    return _kind(uri.partition(":")[0])


def scheme_of(uri: str) -> str:
    """The scheme of a destination URI, as metrics label it (`site`, `webhook`, …)."""
    return uri.split(":", 1)[0]


def is_file_based(uri: str) -> bool:
    """Whether `uri`'s target is a folder that must lie in the allowed roots."""
    kind = kind_of(uri)
    return kind is not None and kind.file_based


def is_reversible(uri: str) -> bool:
    """Whether a publish to `uri` can be undone (an unknown scheme counts as reversible:
    it is refused at parse, and ordering it first delays nothing irreversible)."""
    kind = kind_of(uri)
    return kind is None or kind.reversible


def known_forms(*, with_test_only: bool = True) -> list[str]:
    """How each known destination URI is written, e.g. `site:PATH`."""
    kinds = [kind for kind in map(_kind, _KINDS) if kind is not None]
    return [kind.form for kind in kinds if with_test_only or not kind.test_only]


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


def normalise_destination(uri: str, *, allow_memory: bool = False) -> str:
    """The one spelling of `uri` a saga stores; `InvalidInput` when it is not acceptable."""
    bad = next((ch for ch in uri if unicodedata.category(ch) in _INVISIBLE), None)
    if bad is not None:
        raise InvalidInput(f"destination {uri!r} holds a control character (U+{ord(bad):04X})", uri=uri)
    scheme, target = parse_destination(uri)
    kind = _kind(scheme)
    assert kind is not None  # parse_destination refused unknown schemes
    if kind.test_only and not allow_memory:
        usable = ", ".join(known_forms(with_test_only=False))
        raise InvalidInput(f"{uri!r}: {scheme}: destinations exist for tests only; use {usable}", uri=uri)
    if not kind.file_based:
        return f"{scheme}:{kind.canonical(target)}"
    path = os.path.expanduser(target)
    if ".." in PurePosixPath(path).parts:
        raise InvalidInput(f"destination path must not contain '..': {uri}", uri=uri)
    path = os.path.abspath(path)
    if path.startswith("//"):  # POSIX keeps a leading '//' apart; here it is just '/'
        path = "/" + path.lstrip("/")
    return f"{scheme}:{path}"


def check_at_submit(uri: str, settings: Settings) -> None:
    """What the operator's settings refuse about a stored-spelling `uri` now (a webhook's
    host, an email's recipient domains); `InvalidInput` naming it. The roots of a
    file-based kind are the caller's to check (`is_file_based`)."""
    scheme, target = parse_destination(uri)
    kind = _kind(scheme)
    assert kind is not None
    kind.check_at_submit(target, settings)


def open_destination(
    uri: str,
    *,
    timeout: float,
    link_hosts: frozenset[str] = frozenset(),
    webhook_allow: WebhookAllow | None = None,
    roots: Sequence[Path] = (),
    settings: Settings | None = None,
) -> Destination:
    """The adapter for `uri`; `timeout` bounds each call that can hang (seconds);
    `link_hosts` are the hosts a rendered `site:` page may link to; `webhook_allow`
    the non-public hosts a `webhook:` may reach (`PRESSROOM_WEBHOOK_ALLOW`; none when omitted);
    `roots` the folders a `site:` folder must lie in at the effect (`PRESSROOM_ALLOWED_ROOTS`);
    `settings` those a kind reads for itself (`email:` its SMTP server and allowed domains)."""
    if timeout <= 0:
        raise InvalidInput(f"destination timeout must be positive, got {timeout}", uri=uri)
    scheme, target = parse_destination(uri)
    kind = _kind(scheme)
    assert kind is not None  # parse_destination refused unknown schemes
    options = OpenOptions(link_hosts=link_hosts, webhook_allow=webhook_allow, roots=roots, settings=settings)
    return kind.open(target, uri=uri, timeout=timeout, options=options)


__all__ = [
    "DestinationKind",
    "check_at_submit",
    "check_key",
    "contained_path",
    "is_file_based",
    "is_reversible",
    "kind_of",
    "known_forms",
    "normalise_destination",
    "open_destination",
    "parse_destination",
    "scheme_of",
    "slugify",
]

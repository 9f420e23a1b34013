"""The keyed chain over a saga's events. No I/O.

Each event stores the link of the saga's previous event (`GENESIS` for the
first) and its own link over that and a canonical serialisation of its
fields, like the checkpoints do: an edited, inserted or removed event breaks
the chain from there on. Times are hashed as naive UTC with microseconds, the
form both SQLite and PostgreSQL give back.

Links are keyed: sha256 over the previous link, the event's canonical bytes and
its tag, an HMAC-SHA256 of those bytes under the chain key (`chain_key`, derived
from the signing key with a label of its own). Tags are never stored and the
database does not hold the key, so whoever can write the events table but
lacks the key cannot re-link an edited, removed or moved event.
Events written before keyed links existed keep plain SHA-256 links
(`event_hash`); which ones those are is the signed cutover (`cutover_mac`), so a
forger cannot pass a rewritten event off as an old one.

Every event carries the schema version it was written with (`schema_version`).
Version 1 is every event written before migration 0013 (its column's server
default): its link covers `HASHED_FIELDS`. Version 2 (`EVENT_SCHEMA`, what is
written now) has the same columns and details, and its link covers
`schema_version` too, so rewriting the version of any event breaks its link:
a version-2 event read as 1 loses a hashed field, a version-1 event read as 2
gains one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orchestrator.harness.checkpoints import GENESIS
from orchestrator.harness.digests import canonical_json, sha256_hex

# The stored fields a version-1 event's hash covers (all its columns but `seq` and the two
# hashes); migration 0003 chained the events before it with these.
HASHED_FIELDS: tuple[str, ...] = (
    "event_id",
    "parent_event_id",
    "saga_id",
    "actor",
    "principal_id",
    "auth_method",
    "kind",
    "status",
    "tool",
    "artifact_digest",
    "detail",
    "created_at",
    "proposed_at",
    "authorized_at",
    "sent_at",
    "acked_at",
)
# The schema version of every event written before the column existed (its server default).
LEGACY_SCHEMA = 1
# The schema version events are written with now: its link covers `schema_version` as well.
EVENT_SCHEMA = 2
KNOWN_SCHEMAS: tuple[int, ...] = (LEGACY_SCHEMA, EVENT_SCHEMA)
# The stored fields some version's link covers: what a verifier reads of each event.
CHAIN_FIELDS: tuple[str, ...] = (*HASHED_FIELDS, "schema_version")
_TIMES = frozenset({"created_at", "proposed_at", "authorized_at", "sent_at", "acked_at"})


def _time(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"an event time must be a datetime, not {type(value).__name__}")
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    stamp: str = value.isoformat(timespec="microseconds")
    return stamp


def schema_of(fields: Mapping[str, Any]) -> int:
    """The schema version `fields` were written with (absent or null: `LEGACY_SCHEMA`).
    ValueError for a version this release does not know."""
    version = fields.get("schema_version")
    if version is None:
        return LEGACY_SCHEMA
    if type(version) is not int or version not in KNOWN_SCHEMAS:
        known = ", ".join(str(v) for v in KNOWN_SCHEMAS)
        raise ValueError(f"schema version {version!r} is not one this release knows ({known})")
    return version


def hashed_fields(version: int) -> tuple[str, ...]:
    """The fields an event of schema `version` has its link cover."""
    return HASHED_FIELDS if version == LEGACY_SCHEMA else CHAIN_FIELDS


def canonical_event(fields: Mapping[str, Any]) -> bytes:
    """The bytes an event's hash covers: the fields its schema version hashes
    (`hashed_fields`), canonical JSON. Version 1's bytes are those every earlier
    release hashed."""
    names = hashed_fields(schema_of(fields))
    body = {name: _time(fields.get(name)) if name in _TIMES else fields.get(name) for name in names}
    if body["detail"] is None:
        body["detail"] = {}
    return canonical_json(body)


def event_hash(prev_hash: str, fields: Mapping[str, Any]) -> str:
    """A plain (legacy) link: sha256 over the previous link and the event's canonical bytes."""
    return link_hash(prev_hash, canonical_event(fields))


def link_hash(prev_hash: str, canonical: bytes) -> str:
    """A plain (legacy) link from its predecessor's and its own `canonical_event` bytes."""
    return sha256_hex(prev_hash.encode() + canonical)


# Labels keep the keys derived from the one signing key apart from each other and from
# the approval signatures made with the signing key itself.
CHAIN_LABEL = b"pressroom event chain v2"
CHECKPOINT_LABEL = b"pressroom audit checkpoint v1"
CUTOVER_LABEL = b"pressroom chain cutover v1"


def derive_key(secret: bytes, label: bytes) -> bytes:
    """A key of its own for `label`, from `secret` (HMAC-SHA256 of the label)."""
    return hmac.new(secret, label, hashlib.sha256).digest()


def chain_key(signing_key: bytes) -> bytes:
    """The key event links are made with, from the signing key (`Settings.signing_key()`)."""
    return derive_key(signing_key, CHAIN_LABEL)


def event_tag(key: bytes, canonical: bytes) -> bytes:
    """An event's tag: HMAC-SHA256 under the chain key over its `canonical_event` bytes.
    Never stored: only a holder of the key can compute it, so only they can link an event."""
    return hmac.new(key, canonical, hashlib.sha256).digest()


def keyed_link(key: bytes, prev_hash: str, canonical: bytes) -> str:
    """An event's link: sha256 over the previous link, the event's canonical bytes and its
    `event_tag`. The rule a PostgreSQL statement that links an event itself computes too
    (`ChainedEvent`: the tag is computed here and bound, so the key never leaves the process)."""
    return sha256_hex(prev_hash.encode() + canonical + event_tag(key, canonical))


def keyed_event_hash(key: bytes, prev_hash: str, fields: Mapping[str, Any]) -> str:
    return keyed_link(key, prev_hash, canonical_event(fields))


def cutover_mac(key: bytes, plain_upto: int) -> str:
    """The signature of the cutover: events with `seq <= plain_upto` have plain links."""
    return hmac.new(derive_key(key, CUTOVER_LABEL), str(plain_upto).encode(), hashlib.sha256).hexdigest()


def checkpoint_mac(key: bytes, body: Mapping[str, Any]) -> str:
    """The signature of an exported checkpoint's body (everything but `mac`)."""
    return hmac.new(derive_key(key, CHECKPOINT_LABEL), canonical_json(dict(body)), hashlib.sha256).hexdigest()


def first_broken(
    links: Sequence[tuple[str, str, Mapping[str, Any]]], key: bytes | None = None, plain: int | None = None
) -> tuple[int, str] | None:
    """The index of the first broken link in [(prev_hash, hash, fields)] and why, or None.
    `fields` holds at least `CHAIN_FIELDS` (each event is hashed as its schema version says).

    The first `plain` links are plain SHA-256 (legacy), the rest keyed with `key`; without a
    key every link is plain."""
    plain_count = len(links) if key is None else (plain or 0)
    expected_prev = GENESIS
    for i, (prev, digest, fields) in enumerate(links):
        if prev != expected_prev:
            return i, "its prev_hash does not name the event before it"
        try:
            schema_of(fields)
        except ValueError as exc:
            return i, str(exc)
        if i < plain_count or key is None:
            expected = event_hash(prev, fields)
        else:
            expected = keyed_event_hash(key, prev, fields)
        if not hmac.compare_digest(expected, digest):
            return i, "its hash does not match its fields"
        expected_prev = digest
    return None


__all__ = [
    "CHAIN_FIELDS",
    "CHAIN_LABEL",
    "CHECKPOINT_LABEL",
    "CUTOVER_LABEL",
    "EVENT_SCHEMA",
    "GENESIS",
    "HASHED_FIELDS",
    "KNOWN_SCHEMAS",
    "LEGACY_SCHEMA",
    "canonical_event",
    "chain_key",
    "checkpoint_mac",
    "cutover_mac",
    "derive_key",
    "event_hash",
    "first_broken",
    "event_tag",
    "hashed_fields",
    "keyed_event_hash",
    "keyed_link",
    "link_hash",
    "schema_of",
]

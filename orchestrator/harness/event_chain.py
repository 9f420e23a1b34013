"""The hash chain over a saga's events. No I/O.

Each event stores the hash of the saga's previous event (`GENESIS` for the
first) and its own hash over that link and a canonical serialisation of its
fields, like the checkpoints do: an edited, inserted or removed event breaks
the chain from there on. Times are hashed as naive UTC with microseconds, the
form both SQLite and PostgreSQL give back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orchestrator.harness.checkpoints import GENESIS
from orchestrator.harness.digests import canonical_json, sha256_hex

# The stored fields an event's hash covers (everything but `seq` and the two hashes).
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


def canonical_event(fields: Mapping[str, Any]) -> bytes:
    """The bytes an event's hash covers: its `HASHED_FIELDS`, canonical JSON."""
    body = {name: _time(fields.get(name)) if name in _TIMES else fields.get(name) for name in HASHED_FIELDS}
    if body["detail"] is None:
        body["detail"] = {}
    return canonical_json(body)


def event_hash(prev_hash: str, fields: Mapping[str, Any]) -> str:
    return link_hash(prev_hash, canonical_event(fields))


def link_hash(prev_hash: str, canonical: bytes) -> str:
    """An event's hash from its predecessor's and its own `canonical_event` bytes: the rule
    a PostgreSQL statement that links an event itself computes too (`ChainedEvent`)."""
    return sha256_hex(prev_hash.encode() + canonical)


def first_broken(links: Sequence[tuple[str, str, Mapping[str, Any]]]) -> tuple[int, str] | None:
    """The index of the first broken link in [(prev_hash, hash, fields)] and why, or None."""
    expected_prev = GENESIS
    for i, (prev, digest, fields) in enumerate(links):
        if prev != expected_prev:
            return i, "its prev_hash does not name the event before it"
        if event_hash(prev, fields) != digest:
            return i, "its hash does not match its fields"
        expected_prev = digest
    return None


__all__ = ["GENESIS", "HASHED_FIELDS", "canonical_event", "event_hash", "first_broken", "link_hash"]

"""Event schema versions, without services: what each version's link covers, and that the
reducer reads every version the project has written and refuses any other."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from orchestrator.harness.event_chain import (
    EVENT_SCHEMA,
    GENESIS,
    KNOWN_SCHEMAS,
    LEGACY_SCHEMA,
    canonical_event,
    chain_key,
    event_hash,
    first_broken,
    keyed_event_hash,
)
from sagas.reducer import EventLogMismatch, LoggedEvent, reduce

APPROVED: dict[str, Any] = {
    "event_id": "e1",
    "parent_event_id": None,
    "saga_id": "s1",
    "actor": "erin",
    "principal_id": None,
    "auth_method": None,
    "kind": "transition",
    "status": "approved",
    "tool": None,
    "artifact_digest": None,
    "detail": {"event": "approve", "from": "ready-for-review", "to": "approved"},
    "created_at": datetime(2026, 12, 3, 10, 0, 0, 123456),
    "proposed_at": None,
    "authorized_at": None,
    "sent_at": None,
    "acked_at": None,
}
KEY = chain_key(b"golden")
# Computed by the release at migration 0012, before events had a schema version.
RELEASE_0012_PLAIN = "2a04e97b86a4427f5ee5a38e16d5708f4506aa64e8dcb9d5c5efecef2945e860"
RELEASE_0012_KEYED = "9118aca81a8703f4648056d1de105bc83d6d550d738ffe1eb36bc1076cdb5f1c"


def test_version_one_is_linked_as_the_release_before_versions_linked_every_event() -> None:
    for fields in (APPROVED, {**APPROVED, "schema_version": LEGACY_SCHEMA}):
        assert event_hash(GENESIS, fields) == RELEASE_0012_PLAIN
        assert keyed_event_hash(KEY, GENESIS, fields) == RELEASE_0012_KEYED
        assert b"schema_version" not in canonical_event(fields)


def test_version_two_links_its_version_so_no_rewrite_of_a_version_goes_unseen() -> None:
    current = {**APPROVED, "schema_version": EVENT_SCHEMA}
    assert EVENT_SCHEMA == 2 and KNOWN_SCHEMAS == (1, 2)
    assert b'"schema_version":2' in canonical_event(current)
    link = keyed_event_hash(KEY, GENESIS, current)
    assert link != RELEASE_0012_KEYED
    for forged in (LEGACY_SCHEMA, None):  # read as version 1: the hashed version is gone
        broken = first_broken([(GENESIS, link, {**current, "schema_version": forged})], KEY)
        assert broken == (0, "its hash does not match its fields")
    # A version-1 event read as 2 gains a hashed field.
    assert first_broken([(GENESIS, RELEASE_0012_KEYED, current)], KEY) == (
        0,
        "its hash does not match its fields",
    )
    assert first_broken([(GENESIS, link, current)], KEY) is None


@pytest.mark.parametrize("version", [0, 3, "2", True])
def test_a_version_no_release_wrote_breaks_the_chain_at_that_event(version: object) -> None:
    broken = first_broken([(GENESIS, RELEASE_0012_KEYED, {**APPROVED, "schema_version": version})], KEY)
    assert broken is not None and broken[0] == 0
    assert broken[1].startswith(f"schema version {version!r} is not one this release knows")


def _log(versions: list[int]) -> list[LoggedEvent]:
    shapes = [
        ("saga", "submitted", {}),
        ("version", "created", {"version": 1}),
        ("transition", "ready", {"event": "review_passed", "from": "preparing", "to": "ready-for-review"}),
        ("transition", "approved", {"event": "approved", "from": "ready-for-review", "to": "approved"}),
        ("step", "pending", {"destination": "site:/s", "key": "k1"}),
    ]
    return [
        LoggedEvent(seq=n, kind=kind, status=status, detail=detail, schema_version=version)
        for n, ((kind, status, detail), version) in enumerate(zip(shapes, versions, strict=True), 1)
    ]


def test_the_reducer_reads_every_version_alike_and_refuses_an_unknown_one() -> None:
    old = reduce(_log([1] * 5))
    assert old.state.value == "approved" and old.steps["site:/s"].key == "k1"
    assert reduce(_log([2] * 5)) == old
    assert reduce(_log([1, 1, 1, 2, 2])) == old  # a saga the upgrade found half way
    assert LoggedEvent(kind="saga", status="submitted").schema_version == LEGACY_SCHEMA
    with pytest.raises(EventLogMismatch, match="event 4 .*schema version 3 is not one this release reads"):
        reduce(_log([1, 1, 2, 3, 2]))

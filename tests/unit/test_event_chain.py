"""The event hash chain (pure): what it covers, and what breaks it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from orchestrator.harness.event_chain import GENESIS, HASHED_FIELDS, event_hash, first_broken


def fields(n: int, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "event_id": f"e{n}",
        "saga_id": "s1",
        "actor": "dana",
        "kind": "transition",
        "status": "preparing",
        "detail": {"from": None, "n": n},
        "created_at": datetime(2026, 1, 1, 12, 0, n, 123456, tzinfo=UTC),
    }
    return {**base, **extra}


def chain(items: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    links, prev = [], GENESIS
    for f in items:
        digest = event_hash(prev, f)
        links.append((prev, digest, f))
        prev = digest
    return links


def test_an_intact_chain() -> None:
    assert first_broken(chain([fields(i) for i in range(5)])) is None
    assert first_broken([]) is None


def test_every_hashed_field_counts() -> None:
    base = fields(1)
    digest = event_hash(GENESIS, base)
    for name in HASHED_FIELDS:
        changed = {
            **base,
            name: {"other": True}
            if name == "detail"
            else (base["created_at"] + timedelta(seconds=1) if name.endswith("_at") else "x"),
        }
        assert event_hash(GENESIS, changed) != digest, name
    assert event_hash("f" * 64, base) != digest  # the link is covered too


def test_times_hash_the_same_whether_aware_or_naive_utc() -> None:
    aware = fields(1)
    naive = {**aware, "created_at": aware["created_at"].replace(tzinfo=None)}
    elsewhere = {**aware, "created_at": aware["created_at"].astimezone(timezone(timedelta(hours=5)))}
    assert event_hash(GENESIS, aware) == event_hash(GENESIS, naive) == event_hash(GENESIS, elsewhere)


def test_detail_key_order_does_not_matter() -> None:
    a = fields(1, detail={"a": 1, "b": [1, 2]})
    b = fields(1, detail={"b": [1, 2], "a": 1})
    assert event_hash(GENESIS, a) == event_hash(GENESIS, b)


def test_an_edited_event_is_found() -> None:
    links = chain([fields(i) for i in range(4)])
    prev, digest, f = links[2]
    links[2] = (prev, digest, {**f, "actor": "mallory"})
    assert first_broken(links) == (2, "its hash does not match its fields")


def test_a_removed_or_reordered_event_is_found() -> None:
    links = chain([fields(i) for i in range(4)])
    assert first_broken(links[:1] + links[2:]) == (1, "its prev_hash does not name the event before it")
    assert first_broken([links[1], links[0]]) == (0, "its prev_hash does not name the event before it")


def test_a_rehashed_edit_still_breaks_the_next_link() -> None:
    links = chain([fields(i) for i in range(3)])
    prev, _, f = links[1]
    edited = {**f, "status": "succeeded"}
    links[1] = (prev, event_hash(prev, edited), edited)  # the forger recomputes this one's hash
    assert first_broken(links) == (2, "its prev_hash does not name the event before it")

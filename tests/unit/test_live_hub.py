"""`LiveHub`: the bounds, and one read per watched saga per poll however many streams watch."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.entrypoints.web.live import LiveHub, TooManyStreams


def test_bounds_per_user_and_in_total_and_slots_come_back() -> None:
    async def run() -> None:
        hub = LiveHub(lambda ids: {i: "f" for i in ids}, per_user=2, total=3, poll=60)
        a1 = hub.open("a", "s1", "ca", lambda: True, 55)
        hub.open("a", "s1", "ca", lambda: True, 55)
        with pytest.raises(TooManyStreams, match="at most 2 live streams per user"):
            hub.open("a", "s2", "ca", lambda: True, 55)
        hub.open("b", "s1", "cb", lambda: True, 55)
        with pytest.raises(TooManyStreams, match="at most 3 live streams are open at once"):
            hub.open("c", "s1", "cc", lambda: True, 55)
        hub.close(a1)
        hub.open("c", "s1", "cc", lambda: True, 55)
        assert hub.count() == 3 and hub.count("a") == 1
        stale = hub.open  # a stream that never started is dropped once its lifetime has passed
        for w in list(hub.watchers):
            w.expires = 0
        stale("d", "s1", "cd", lambda: True, 55)
        assert hub.count() == 1

    asyncio.run(run())


def test_one_poll_reads_each_saga_and_each_credential_once() -> None:
    reads: list[list[str]] = []
    checks: list[str] = []

    def fingerprints(ids: list[str]) -> dict[str, str]:
        reads.append(ids)
        return {i: f"fp-{i}" for i in ids}

    def check(name: str, answer: bool) -> bool:
        checks.append(name)
        return answer

    async def run() -> None:
        hub = LiveHub(fingerprints, per_user=100, total=100, poll=60)
        watchers = [hub.open("a", f"s{n % 3}", "ca", lambda: check("ca", True), 55) for n in range(30)]
        revoked = hub.open("b", "s0", "cb", lambda: check("cb", False), 55)
        await hub.poll_once()
        assert [sorted(r) for r in reads][-1] == ["s0", "s1", "s2"]
        assert sorted(checks[-2:]) == ["ca", "cb"]
        assert all(w.woken.is_set() and w.fingerprint == f"fp-s{n % 3}" for n, w in enumerate(watchers))
        assert all(w.allowed for w in watchers) and not revoked.allowed

    asyncio.run(run())
    # The hub's own poller ran once at the first open too: never once per stream.
    assert len(reads) <= 2 and len(checks) <= 4

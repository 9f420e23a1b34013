"""`memory:NAME`: an in-process destination for the demo and the tests.

- URI: `memory:NAME`. Stores are module-level and named, so two opens of
  `memory:x` in one process see the same pages; nothing survives the process.
- Idempotency: a dict from idempotency key to receipt; a key already there
  answers with its receipt and applies nothing.
- Status: a lookup of the key (applied or absent), unless a fault says
  `unknown`.
- Compensation: drop the key and its page; an absent key is a no-op.

Faults can be injected per store (`fail_next_publish`, `status_unknown`,
`fail_next_compensate`) to drive the saga through its definite, uncertain
and unknown paths; `calls` counts every call by method and `effects` counts
publishes actually applied.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import OpenOptions, PublishedVersion, StatusAnswer
from sagas.destinations.slugs import check_key

if TYPE_CHECKING:
    from orchestrator.core.config import Settings

PublishFault = Literal["not-applied", "applied-then-lost", "lost-before-apply"]
"""`not-applied`: refuse definitely. `applied-then-lost`: apply, then raise
`MaybeApplied` (a timeout after the effect). `lost-before-apply`: raise
`MaybeApplied` without applying (a timeout before the effect)."""


@dataclass
class MemoryStore:
    """The pages, receipts, counters and pending faults of one `memory:NAME`."""

    name: str
    receipts: dict[str, dict[str, Any]] = field(default_factory=dict)
    pages: dict[str, PublishedVersion] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    effects: int = 0
    status_unknown: bool = False
    publish_faults: list[PublishFault] = field(default_factory=list)
    compensate_faults: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def fail_next_publish(self, fault: PublishFault = "not-applied") -> None:
        """Make the next publish that would apply fail in the given way (faults queue up)."""
        with self.lock:
            self.publish_faults.append(fault)

    def fail_next_compensate(self) -> None:
        """Make the next compensation of an applied key raise `NotApplied`."""
        with self.lock:
            self.compensate_faults += 1

    def reset(self) -> None:
        with self.lock:
            self.receipts.clear()
            self.pages.clear()
            self.calls.clear()
            self.effects = 0
            self.status_unknown = False
            self.publish_faults.clear()
            self.compensate_faults = 0


_STORES: dict[str, MemoryStore] = {}
_STORES_LOCK = threading.Lock()


def memory_store(name: str) -> MemoryStore:
    """The store named `name`, created empty on first use."""
    with _STORES_LOCK:
        store = _STORES.get(name)
        if store is None:
            store = _STORES[name] = MemoryStore(name)
        return store


def reset_memory_stores() -> None:
    """Forget every named store (tests call this between cases)."""
    with _STORES_LOCK:
        _STORES.clear()


class MemoryDestination:
    """A `Destination` over a named in-process `MemoryStore`."""

    form: ClassVar[str] = "memory:NAME"
    file_based: ClassVar[bool] = False
    reversible: ClassVar[bool] = True
    test_only: ClassVar[bool] = True

    def __init__(self, name: str, *, uri: str | None = None) -> None:
        self.check_target(name)
        self.uri = uri or f"memory:{name}"
        self.store = memory_store(name)

    @classmethod
    def check_target(cls, target: str) -> None:
        if not target.strip():
            raise InvalidInput("memory: needs a store name, as in memory:NAME", target=target)

    @classmethod
    def canonical(cls, target: str) -> str:
        return target

    @classmethod
    def check_at_submit(cls, target: str, settings: Settings) -> None:
        """Nothing: a test store needs no setting."""

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float, options: OpenOptions) -> MemoryDestination:
        return cls(target, uri=uri)

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        check_key(key)
        store = self.store
        with store.lock:
            store.calls["publish"] += 1
            if key in store.receipts:
                return dict(store.receipts[key])
            fault = store.publish_faults.pop(0) if store.publish_faults else None
            if fault == "not-applied":
                raise NotApplied(f"{self.uri}: injected definite failure", uri=self.uri, key=key)
            if fault == "lost-before-apply":
                raise MaybeApplied(f"{self.uri}: injected timeout before apply", uri=self.uri, key=key)
            store.effects += 1
            receipt = {
                "memory": store.name,
                "key": key,
                "sequence": store.effects,
                "version_digest": version.version_digest,
            }
            store.receipts[key] = receipt
            store.pages[key] = version
            if fault == "applied-then-lost":
                raise MaybeApplied(f"{self.uri}: injected timeout after apply", uri=self.uri, key=key)
            return dict(receipt)

    def status(self, key: str) -> StatusAnswer:
        check_key(key)
        store = self.store
        with store.lock:
            store.calls["status"] += 1
            if store.status_unknown:
                return StatusAnswer(kind="unknown", detail="injected: status unavailable")
            receipt = store.receipts.get(key)
            if receipt is None:
                return StatusAnswer(kind="absent")
            return StatusAnswer(kind="applied", receipt=dict(receipt))

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        check_key(key)
        store = self.store
        with store.lock:
            store.calls["compensate"] += 1
            if key not in store.receipts:
                return
            if store.compensate_faults:
                store.compensate_faults -= 1
                raise NotApplied(f"{self.uri}: injected compensation failure", uri=self.uri, key=key)
            del store.receipts[key]
            del store.pages[key]


__all__ = ["MemoryDestination", "MemoryStore", "PublishFault", "memory_store", "reset_memory_stores"]

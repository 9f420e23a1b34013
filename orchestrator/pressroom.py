"""The composition root's product: what `bootstrap.build_app` hands every entry point.

`Pressroom` holds the use cases (`reads`, `submissions`, `reviews`,
`operations`, `comments`), the messaging (`dispatcher`, `consumer`, `relay`)
and the adapters the entry points and tests reach for (the engine, the one
tool path, the people store, the settings). It holds no behaviour of its own
beyond `close`; the Celery worker and the entry points import this type, never
`bootstrap`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from orchestrator.comments import Comments
from orchestrator.core.clock import Clock
from orchestrator.core.config import Settings
from orchestrator.harness.registry import Registry
from orchestrator.operations import Operations
from orchestrator.reads.queries import Reads
from orchestrator.services import Reviews
from orchestrator.store.harness_store import SqlHarnessStore
from orchestrator.store.people import SqlPeopleStore
from orchestrator.submission import Submissions
from orchestrator.toolpath.engine import Harness
from outbox.broker import Broker
from outbox.consumer import Consumer
from outbox.dispatch import Dispatcher
from outbox.handlers import Handler
from outbox.relay import Relay
from outbox.writer import Outbox
from roles.index import CorpusIndexes
from sagas.runner import SagaRunner


@dataclass(frozen=True)
class Pressroom:
    settings: Settings
    engine: Engine
    clock: Clock
    registry: Registry
    store: SqlHarnessStore
    harness: Harness
    runner: SagaRunner
    people: SqlPeopleStore
    indexes: CorpusIndexes
    signing_key: bytes
    broker: Broker
    outbox: Outbox
    dispatcher: Dispatcher
    consumer: Consumer
    relay: Relay
    reads: Reads
    submissions: Submissions
    reviews: Reviews
    operations: Operations
    comments: Comments

    @property
    def handlers(self) -> dict[str, Handler]:
        """The consumer's handlers by task (a test may add or wrap one)."""
        return self.consumer.handlers

    def close(self) -> None:
        """Write the sent-marks still queued, then let the database go: a Pressroom whose
        database is about to be removed (a test's, an evaluation run's) closes first."""
        self.outbox.marks.close()
        self.engine.dispose()


__all__ = ["Pressroom"]

"""The composition root: one `build_app(settings, **overrides)` for every entry point.

It chooses the adapters (database, broker, destinations), registers every
tool in one registry, wraps them in the one harness, wires the role
handler (for every registered role kind's task) and the publisher's into the
consumer, and builds each use case with only what it uses, all on one
`Clock`: by default the database's (`orchestrator.store.db_clock`), which it also installs
as this process's `DATABASE_TIME`. It returns a `Pressroom` (`orchestrator.pressroom`). Tests pass
overrides here instead of patching modules.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial

from pydantic import BaseModel, ConfigDict
from sqlmodel import Session

from orchestrator.comments import Comments
from orchestrator.core.clock import DATABASE_TIME, Clock
from orchestrator.core.config import Settings
from orchestrator.core.routing import PUBLISH
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import Risk, ToolSpec
from orchestrator.operations import PRUNE_EVERY, Operations
from orchestrator.pressroom import Pressroom
from orchestrator.reads.queries import Reads
from orchestrator.saga_tools import saga_tools
from orchestrator.services import Reviews
from orchestrator.store.chain_keys import use_chain_key
from orchestrator.store.db import UnitOfWork, make_engine, unit_of_work
from orchestrator.store.db_clock import database_clock
from orchestrator.store.handle_uses import SqlHandleUses
from orchestrator.store.harness_store import SqlHarnessStore
from orchestrator.store.people import SqlPeopleStore
from orchestrator.store.tables import WorkRow
from orchestrator.store.work import renew_lease, sweep_expired
from orchestrator.submission import Submissions
from orchestrator.toolpath.engine import Harness
from outbox.broker import Broker, CeleryBroker, InlineBroker, NullBroker
from outbox.consumer import Consumer
from outbox.dispatch import Dispatcher
from outbox.handlers import Handler
from outbox.relay import Relay
from outbox.writer import Outbox
from roles.index import CorpusIndexes
from sagas.destination_limits import DestinationLimits
from sagas.destinations.base import Destination
from sagas.destinations.registry import open_destination as open_real_destination
from sagas.destinations.webhook_urls import WebhookAllow
from sagas.leases import give_up
from sagas.publishing import PublishingTools
from sagas.runner import SagaRunner
from telemetry.propagation import system_for_broker_url


class _Anything(BaseModel):
    model_config = ConfigDict(extra="allow")


# Registered so that they are known and always refused (never removed to pass a test).
DENIED_TOOLS = (
    ("approval.grant", "Grant an approval. Only a person can approve, through the CLI or the web page."),
    ("capability.grant", "Widen a caller's capabilities. Capabilities only shrink."),
    ("shell.run", "Run a shell command."),
)


def denied_specs() -> list[ToolSpec]:
    return [
        ToolSpec(name=name, description=text, input_model=_Anything, risk=Risk.DENY, executor=None)
        for name, text in DENIED_TOOLS
    ]


def make_broker(settings: Settings) -> Broker:
    url = settings.broker_url
    if url.startswith("inline:"):
        return InlineBroker()
    if url.startswith("none:"):
        return NullBroker()
    from orchestrator.celery_app import make_celery

    return CeleryBroker(make_celery(url, link_timeout=settings.link_timeout), system_for_broker_url(url))


def build_app(
    settings: Settings | None = None,
    *,
    broker: Broker | None = None,
    open_destination: Callable[[str], Destination] | None = None,
    extra_tools: list[ToolSpec] | None = None,
    memory_destinations: bool = False,
    indexes: CorpusIndexes | None = None,
    clock: Clock | None = None,
    instrument: Callable[[Harness], Harness] | None = None,
) -> Pressroom:
    """The application for `settings`. `instrument` wraps the one tool path every handler,
    use case and entry point is given (the evaluation records each call with it). `clock`
    is the one clock: the use cases, the runner, the tool path, the leases and the relay's
    sweeps all read it; by default the database's (`database_clock`)."""
    from roles.handlers import RolePorts, handle_role
    from roles.kind_plugins import load_kinds
    from roles.tools import role_tools

    settings = settings or Settings()
    role_kinds = load_kinds()  # the built-in kinds and those of the `pressroom.role_kinds` entry points
    engine = make_engine(
        settings.database_url,
        connect_retry=settings.connect_retry,
        pool_size=settings.db_pool_size,
        link_timeout=settings.link_timeout,
    )
    # Times one process writes and another compares are read on the database's clock.
    DATABASE_TIME.use(database_clock(engine))
    clock = clock or DATABASE_TIME.clock

    def transact() -> AbstractContextManager[UnitOfWork]:
        return unit_of_work(engine)

    def sessions() -> Session:
        return Session(engine)

    def drain() -> int:
        # Bound late: the consumer is built last, once the handlers it runs exist.
        return consumer.drain()

    store = SqlHarnessStore(engine, clock=clock)
    key = settings.signing_key()
    use_chain_key(engine, key)  # events are linked under a key derived from it
    webhook_allow = WebhookAllow.parse(settings.webhook_allow)
    opener = open_destination or (
        lambda uri: open_real_destination(
            uri,
            timeout=settings.destination_timeout,
            link_hosts=settings.allowed_link_hosts(),
            webhook_allow=webhook_allow,
            roots=settings.roots(),
            settings=settings,
        )
    )
    indexes = indexes or CorpusIndexes(settings.index_folder(), clock=clock)
    people = SqlPeopleStore(engine)
    broker = broker or make_broker(settings)
    outbox = Outbox(engine, broker)
    dispatcher = Dispatcher(outbox, lease_seconds=settings.lease_seconds, clock=clock, signing_key=key)
    reads = Reads(sessions, clock, review_reminder=settings.review_reminder)
    submissions = Submissions(
        transact=transact,
        sessions=sessions,
        dispatch=dispatcher.dispatch,
        drain=drain,
        reads=reads,
        people=people,
        indexes=indexes,
        settings=settings,
        clock=clock,
        memory_destinations=memory_destinations,
    )
    registry = Registry()
    for spec in [
        *role_tools(engine, indexes, settings.allowed_link_hosts()),
        *PublishingTools(engine, opener, settings.roots(), link_hosts=settings.allowed_link_hosts()).specs(),
        *saga_tools(submissions, reads, settings),
        *denied_specs(),
        *(extra_tools or []),
    ]:
        registry.register(spec)
    harness = Harness(
        registry,
        store,
        signing_key=key,
        clock=clock,
        claim_seconds=settings.destination_timeout + 5,
        saga_budget=settings.saga_budget,
        uses=SqlHandleUses(),
    )
    tools = instrument(harness) if instrument is not None else harness
    runner = SagaRunner(
        transact=transact,
        tools=tools,
        store=store,
        signing_key=key,
        clock=clock,
        renew=lambda work_id, holder: renew_lease(
            engine, work_id, holder, settings.lease_seconds, now=clock.now()
        ),
        limits=DestinationLimits(settings.destination_concurrency),
        pause=time.sleep,
        # A publish call pins a database connection: as many call threads as half the pool
        # holds (the other half is for the deliveries' own units of work), at least 2.
        call_threads=max(2, settings.db_pool_size // 2),
    )
    roles = RolePorts(
        engine=engine,
        tools=tools,
        dispatch=dispatcher.dispatch,
        settings=settings,
        catalogue=registry,
        signing_key=key,
        clock=clock,
    )
    # One handler for every kind's task: the saga's pipeline says which role runs when.
    handlers: dict[str, Handler] = {
        kind.task: partial(handle_role, roles, kind.name) for kind in role_kinds.values()
    }
    handlers[PUBLISH] = runner.handle
    consumer = Consumer(
        engine=engine,
        transact=transact,
        handlers=handlers,
        dispatcher=dispatcher,
        broker=broker,
        store=store,
        on_parked=lambda destinations, wake, key: runner.limits.when_free(destinations, wake, key=key),
        lease_seconds=settings.lease_seconds,
        clock=clock,
        model=settings.model,
    )
    reviews = Reviews(
        transact=transact,
        dispatch=dispatcher.dispatch,
        drain=drain,
        reads=reads,
        people=people,
        runner=runner,
        settings=settings,
        signing_key=key,
        clock=clock,
    )
    operations = Operations(
        engine=engine,
        transact=transact,
        sessions=sessions,
        drain=drain,
        reads=reads,
        people=people,
        runner=runner,
        harness=tools,
        outbox=outbox,
        store=store,
        settings=settings,
        signing_key=key,
        clock=clock,
        tasks=lambda: consumer.handlers,
    )
    relay = Relay(
        engine,
        broker,
        grace=0.0 if isinstance(broker, InlineBroker) else settings.relay_grace,
        poll=settings.relay_poll,
        sweepers=[
            lambda: sweep_leases(app),
            *operations_sweepers(operations),
        ],
    )
    consumer.relay = relay
    app = Pressroom(
        settings=settings,
        engine=engine,
        clock=clock,
        registry=registry,
        store=store,
        harness=tools,
        runner=runner,
        people=people,
        indexes=indexes,
        signing_key=key,
        broker=broker,
        outbox=outbox,
        dispatcher=dispatcher,
        consumer=consumer,
        relay=relay,
        reads=reads,
        submissions=submissions,
        reviews=reviews,
        operations=operations,
        comments=Comments(transact, sessions, people),
    )
    return app


def operations_sweepers(operations: Operations) -> list[Callable[[], int]]:
    """Lapsed approvals back to review each sweep; PRESSROOM_RETENTION pruning hourly."""
    from orchestrator.retention import RetentionSchedule

    schedule = RetentionSchedule(PRUNE_EVERY)
    return [
        lambda: operations.sweep_lapsed_approvals(),
        lambda: operations.scheduled_prune(schedule),
    ]


def sweep_leases(app: Pressroom) -> int:
    def resend(uow: UnitOfWork, work: WorkRow) -> None:
        app.dispatcher.resend(uow, work.task, work.payload, work.saga_id)

    def exhausted(uow: UnitOfWork, work: WorkRow) -> None:
        give_up(uow, work, app.settings.max_attempts, app.store)

    return sweep_expired(
        app.engine,
        lease=app.settings.lease_seconds,
        max_attempts=app.settings.max_attempts,
        resend=resend,
        exhausted=exhausted,
        now=app.clock.now(),
    )


__all__ = [
    "DENIED_TOOLS",
    "Pressroom",
    "build_app",
    "make_broker",
    "operations_sweepers",
    "sweep_leases",
]

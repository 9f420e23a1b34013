"""The composition root: one `build_app(settings, **overrides)` for every entry point.

It chooses the adapters (database, broker, destinations), registers every
tool in one registry, wraps them in the one harness, and wires the role and
publisher handlers. Tests pass overrides here instead of patching modules.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from orchestrator.app import App
from orchestrator.config import Settings
from orchestrator.harness.engine import Harness
from orchestrator.harness.ports import HarnessStore
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import Risk, ToolSpec
from orchestrator.routing import DRAFT, PUBLISH, RESEARCH, REVIEW
from orchestrator.saga_tools import saga_tools
from orchestrator.store.db import UnitOfWork, make_engine
from orchestrator.store.harness_store import SqlHarnessStore
from orchestrator.store.people import SqlPeopleStore
from orchestrator.store.tables import WorkRow
from orchestrator.store.work import sweep_expired
from outbox.broker import Broker, CeleryBroker, InlineBroker, NullBroker
from outbox.relay import Relay
from outbox.writer import Outbox
from roles.index import CorpusIndexes
from sagas import records
from sagas.destinations.base import Destination
from sagas.destinations.registry import open_destination as open_real_destination
from sagas.machine import SagaEvent, SagaState
from sagas.publishing import PublishingTools
from sagas.runner import publish_handler
from sagas.step_records import set_step
from sagas.step_states import StepState
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

    return CeleryBroker(make_celery(url), system_for_broker_url(url))


def build_app(
    settings: Settings | None = None,
    *,
    broker: Broker | None = None,
    open_destination: Callable[[str], Destination] | None = None,
    extra_tools: list[ToolSpec] | None = None,
    memory_destinations: bool = False,
    indexes: CorpusIndexes | None = None,
) -> App:
    from roles.handlers import draft_handler, research_handler, review_handler
    from roles.tools import role_tools

    settings = settings or Settings()
    engine = make_engine(settings.database_url, connect_retry=settings.connect_retry)
    store = SqlHarnessStore(engine)
    key = settings.signing_key()
    opener = open_destination or (
        lambda uri: open_real_destination(
            uri, timeout=settings.destination_timeout, link_hosts=settings.allowed_link_hosts()
        )
    )
    indexes = indexes or CorpusIndexes(settings.index_folder())
    registry = Registry()
    for spec in [
        *role_tools(engine, indexes, settings.allowed_link_hosts()),
        *PublishingTools(engine, opener, settings.roots(), link_hosts=settings.allowed_link_hosts()).specs(),
        *saga_tools(lambda: app),
        *denied_specs(),
        *(extra_tools or []),
    ]:
        registry.register(spec)
    broker = broker or make_broker(settings)
    app = App(
        settings=settings,
        engine=engine,
        registry=registry,
        store=store,
        harness=Harness(
            registry,
            store,
            signing_key=key,
            claim_seconds=settings.destination_timeout + 5,
            saga_budget=settings.saga_budget,
        ),
        broker=broker,
        outbox=Outbox(engine, broker),
        signing_key=key,
        people=SqlPeopleStore(engine),
        indexes=indexes,
        handlers={
            RESEARCH: research_handler,
            DRAFT: draft_handler,
            REVIEW: review_handler,
            PUBLISH: publish_handler,
        },
        memory_destinations=memory_destinations,
    )
    app.relay = Relay(
        engine,
        broker,
        grace=0.0 if isinstance(broker, InlineBroker) else settings.relay_grace,
        poll=settings.relay_poll,
        sweepers=[lambda: sweep_leases(app), *operations_sweepers(app)],
    )
    return app


def operations_sweepers(app: App) -> list[Callable[[], int]]:
    """Lapsed approvals back to review each sweep; PRESSROOM_RETENTION pruning hourly."""
    from orchestrator import operations
    from orchestrator.store.retention import RetentionSchedule

    schedule = RetentionSchedule(operations.PRUNE_EVERY)
    return [
        lambda: operations.sweep_lapsed_approvals(app),
        lambda: operations.scheduled_prune(app, schedule),
    ]


def sweep_leases(app: App) -> int:
    def resend(uow: UnitOfWork, work: WorkRow) -> None:
        app.resend(uow, work.task, work.payload, work.saga_id)

    def exhausted(uow: UnitOfWork, work: WorkRow) -> None:
        give_up(uow, work, app.settings.max_attempts, app.store)

    return sweep_expired(
        app.engine,
        lease=app.settings.lease_seconds,
        max_attempts=app.settings.max_attempts,
        resend=resend,
        exhausted=exhausted,
    )


def give_up(uow: UnitOfWork, work: WorkRow, attempts: int, store: HarnessStore) -> None:
    """Work that kept losing its lease: fail the saga with the reason, honestly."""
    s = uow.session
    saga = records.load_saga(s, work.saga_id, lock=True)
    reason = f"{work.task} lost its lease {attempts} times; gave up"
    if saga.state == SagaState.PREPARING:
        records.transition(s, saga, SagaEvent.PREPARATION_FAILED, actor="sweeper", reason=reason)
    elif saga.state in (SagaState.APPROVED, SagaState.EXECUTING):
        if saga.state == SagaState.APPROVED:
            records.transition(s, saga, SagaEvent.EXECUTION_STARTED, actor="sweeper")
        # A publish may have started: a step whose intent was recorded with no
        # result is uncertain; what happened is unknown until a person looks.
        records.transition(s, saga, SagaEvent.STEP_UNCERTAIN, actor="sweeper", reason=reason)
        for step in records.steps(s, saga.id):
            key = step.idempotency_key
            if step.state != StepState.DONE and key and store.mark_uncertain(key, within=uow):
                set_step(s, step, StepState.UNCERTAIN, actor="sweeper")


__all__ = ["DENIED_TOOLS", "build_app", "give_up", "make_broker", "operations_sweepers", "sweep_leases"]

"""The Celery app: queues, routing, reliability settings, and thin tasks.

Broker settings live only here. Each task is named `pressroom.<role>.<action>`,
routed by glob to its queue, and does one thing: hand the message to
`Consumer.handle`, which checks the inbox, takes the lease, runs the role through
the harness and commits the result with the next message.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from celery import Celery, Task
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    task_postrun,
    task_prerun,
    task_rejected,
    task_unknown,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_shutdown,
)
from kombu import Exchange, Queue  # type: ignore[attr-defined]

from orchestrator import saga_log
from orchestrator.core.config import DEFAULT_LINK_TIMEOUT
from orchestrator.core.routing import PUBLISH, QUEUES
from orchestrator.pressroom import Pressroom
from orchestrator.store import dead_letters
from outbox.messages import Envelope
from outbox.redis_transport import TRANSPORT as REDIS_TRANSPORT
from roles.kind_plugins import load_kinds

EXCHANGE = Exchange("pressroom", type="direct", durable=True)  # type: ignore[no-untyped-call]
BROKER_MAX_RETRIES = 60
_app_lock = threading.Lock()
_pressroom: Pressroom | None = None
_build: Callable[[], Pressroom] | None = None


def use_app_factory(build: Callable[[], Pressroom]) -> None:
    """How the worker process builds its Pressroom on first use (the composition root hands it in)."""
    global _build
    with _app_lock:
        _build = build


def pressroom_app() -> Pressroom:
    """The worker process's Pressroom, built once by the factory handed in."""
    global _pressroom
    with _app_lock:
        if _pressroom is None:
            if _build is None:
                raise RuntimeError("no Pressroom for this worker: call use_app() or use_app_factory() first")
            _pressroom = _build()
        return _pressroom


def use_app(app: Pressroom | None) -> None:
    """Hand the worker an already built Pressroom (tests, the demo)."""
    global _pressroom
    with _app_lock:
        _pressroom = app


def broker_transport(broker_url: str) -> str | None:
    """The kombu transport for `broker_url`: on `redis://`, kombu's Redis transport with
    acknowledgements that survive a lost connection (`outbox.redis_transport`); else
    None, for kombu to choose by the URL's scheme."""
    return REDIS_TRANSPORT if broker_url.split("://", 1)[0].strip().lower() == "redis" else None


def broker_options(broker_url: str, link_timeout: float = DEFAULT_LINK_TIMEOUT) -> dict[str, Any]:
    """kombu's transport options. On Redis, a connection that goes silent (a partition, a
    failover, a NAT or firewall that dropped it) is given up after `link_timeout` seconds
    instead of waited on for ever: each command (a send, an ack) has that long to be
    answered, and a consumer's BRPOP, which no socket timeout covers, is dropped and
    reconnected once its answer is `link_timeout` overdue (kombu's health check)."""
    options: dict[str, Any] = {"visibility_timeout": 3600}
    if broker_url.split("://", 1)[0].strip().lower() in ("redis", "rediss"):
        options.update(
            socket_timeout=link_timeout,
            socket_connect_timeout=link_timeout,
            health_check_interval=link_timeout,
        )
    return options


def make_celery(
    broker_url: str, *, max_retries: int = BROKER_MAX_RETRIES, link_timeout: float = DEFAULT_LINK_TIMEOUT
) -> Celery:
    celery = Celery("pressroom", broker=broker_url, set_as_current=False)
    celery.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        result_backend=None,
        task_serializer="json",
        accept_content=["json"],
        task_queues=[Queue(q, EXCHANGE, routing_key=q, durable=True) for q in QUEUES],  # type: ignore[no-untyped-call]
        task_routes={f"pressroom.{q}.*": {"queue": q, "routing_key": q} for q in QUEUES},
        task_default_exchange=EXCHANGE.name,
        task_default_queue="researcher",
        task_default_routing_key="researcher",
        # A lost broker connection is retried (kombu's backoff: 2 s more each time,
        # at most 30 s apart); after that many failures the worker gives up and
        # exits non-zero, for its supervisor to restart (see `run_worker`). On Redis
        # the transport lets the worker reconnect although it held unacknowledged
        # messages when the connection dropped (see `outbox.redis_transport`).
        broker_transport=broker_transport(broker_url),
        broker_connection_retry=True,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=max_retries,
        # RabbitMQ: queues survive a broker restart and messages are written to disk.
        task_default_delivery_mode="persistent",
        worker_hijack_root_logger=False,
        # Each line logged while a task runs names its saga (`orchestrator.saga_log`).
        worker_log_format=saga_log.WORKER_LOG_FORMAT,
        worker_task_log_format=saga_log.WORKER_TASK_LOG_FORMAT,
        worker_send_task_events=False,
        broker_transport_options=broker_options(broker_url, link_timeout),
    )
    for name, queue in task_queues().items():
        _register(celery, name, queue)
    return celery


def task_queues() -> dict[str, str]:
    """Every task a worker runs, with its queue: each registered role kind's, and the publisher's."""
    tasks = {kind.task: kind.queue for kind in load_kinds().values()}
    tasks[PUBLISH] = "publisher"
    return tasks


def _register(celery: Celery, name: str, queue: str) -> None:
    def run(self: Task, *args: Any, **kwargs: Any) -> str:
        # Arguments are checked here, not by Celery: a message of the wrong shape
        # becomes a dead letter with its body instead of a failed task.
        request_headers = {k: v for k, v in (self.request.headers or {}).items() if isinstance(v, str)}
        message_id = kwargs.get("message_id") or str(self.request.id)
        headers = kwargs.get("headers") or request_headers
        payload = args[0] if len(args) == 1 else kwargs.get("payload")
        known = set(kwargs) <= {"payload", "message_id", "headers"} and len(args) <= 1
        if not (known and isinstance(payload, dict) and isinstance(headers, dict)):
            app = pressroom_app()
            dead_letters.record(
                app.engine,
                reason="malformed message: expected one JSON object (the handoff) and "
                "message_id/headers keywords",
                body={"args": list(args), "kwargs": kwargs},
                message_id=message_id,
                task=name,
                queue=queue,
                saga_id=dead_letters.saga_hint(payload),
            )
            return "dead-letter"
        env = Envelope(
            message_id=message_id,
            task=name,
            queue=queue,
            payload=payload,
            headers={k: v for k, v in headers.items() if isinstance(v, str)},
        )
        return pressroom_app().consumer.handle(env)

    celery.task(name=name, bind=True, acks_late=True, reject_on_worker_lost=True, shared=False, typing=False)(
        run
    )


def _body_of(message: Any) -> Any:
    import json

    body = getattr(message, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    try:
        return json.loads(body) if isinstance(body, str) else body
    except ValueError:
        return body


@task_unknown.connect  # type: ignore[untyped-decorator]
def _unknown_task(message: Any = None, name: str | None = None, id: str | None = None, **_: Any) -> None:
    # A task name no worker registers: set it aside instead of dropping it.
    app = pressroom_app()
    info = getattr(message, "delivery_info", None) or {}
    dead_letters.record(
        app.engine,
        reason=f"no task named {name!r} is registered",
        body=_body_of(message),
        message_id=id,
        task=name,
        queue=info.get("routing_key"),
        headers=getattr(message, "headers", None) or {},
    )


@task_rejected.connect  # type: ignore[untyped-decorator]
def _rejected(message: Any = None, exc: BaseException | None = None, **_: Any) -> None:
    # Content the worker will not decode (another serializer) or an invalid task message.
    app = pressroom_app()
    info = getattr(message, "delivery_info", None) or {}
    headers = getattr(message, "headers", None) or {}
    dead_letters.record(
        app.engine,
        reason=f"rejected by the worker: {exc!r}"
        if exc
        else "rejected by the worker: unknown message format",
        body=_body_of(message),
        message_id=headers.get("id") if isinstance(headers, dict) else None,
        task=headers.get("task") if isinstance(headers, dict) else None,
        queue=info.get("routing_key"),
        headers=headers if isinstance(headers, dict) else {},
    )


@after_setup_logger.connect  # type: ignore[untyped-decorator]
@after_setup_task_logger.connect  # type: ignore[untyped-decorator]
def _saga_in_log_lines(logger: Any = None, **_: Any) -> None:
    # The worker's formats print `%(saga)s`; every handler they are on fills it in.
    if logger is not None:
        saga_log.add_saga_field(logger)


@task_prerun.connect  # type: ignore[untyped-decorator]
def _task_saga(args: Any = None, kwargs: Any = None, **_: Any) -> None:
    saga_log.task_started(args, kwargs)


@task_postrun.connect  # type: ignore[untyped-decorator]
def _task_saga_done(**_: Any) -> None:
    saga_log.task_ended()


def run_worker(celery: Celery, argv: list[str]) -> int:
    """Run `celery worker` and return its exit status.

    `Celery.worker_main` (and `Celery.start`) drop the status the worker set:
    a worker that stopped on an unrecoverable error (such as its broker
    retries running out) exits 0, which `Restart=on-failure` and compose's
    `on-failure` read as a clean stop. The worker instance is
    remembered when it starts (`worker_init`), and its `exitcode` is returned.
    """
    _workers.clear()
    celery.start(argv=["worker", *argv])
    if not _workers:
        return 1  # the worker was never built (bad arguments were reported)
    return int(getattr(_workers[-1], "exitcode", None) or 0)


_workers: list[Any] = []


@worker_init.connect  # type: ignore[untyped-decorator]
def _remember_worker(sender: Any = None, **_: Any) -> None:
    _workers.append(sender)


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _tracing_after_fork(**_: Any) -> None:
    # Prefork children must set up their own tracer provider after the fork.
    from orchestrator.observability import start_tracing

    start_tracing(_service_name(), after_fork=True)


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _hand_on_before_exit(**_: Any) -> None:
    # Parked publishes are sent again now, for another worker to take, rather than
    # when their leases run out. Then the queued sent-marks are written: a prefork
    # child ends without the interpreter's exit hooks (a mark lost only means the
    # relay sends that row again).
    with _app_lock:
        app = _pressroom
    if app is not None:
        app.runner.limits.wake_all()
        app.outbox.marks.flush()


_queues_for_service: list[str] = []


def set_worker_queues(queues: list[str]) -> None:
    _queues_for_service[:] = queues


def _service_name() -> str:
    return "pressroom-worker-" + ("-".join(_queues_for_service) or "all")


__all__ = [
    "BROKER_MAX_RETRIES",
    "REDIS_TRANSPORT",
    "broker_options",
    "broker_transport",
    "make_celery",
    "pressroom_app",
    "run_worker",
    "set_worker_queues",
    "task_queues",
    "use_app",
    "use_app_factory",
]

"""A Celery worker process of bench/handoff.py (not a bench; started by it).

    python bench/_handoff_worker.py DATABASE_URL BROKER_URL SIGNAL_REDIS_URL MODE QUEUES

It builds the Pressroom Pressroom from `build_app` exactly as `pressroom worker`
would, except that every role task's handler is a no-op handler (Consumer.handlers
is a dict), and hands it to the Celery tasks with
`orchestrator.celery_app.use_app`. The Celery app comes from
`orchestrator.celery_app.make_celery` (same reliability settings as
production: acks late, prefetch 1, JSON, no result backend), plus a
bench-only queue `bench` with two bench tasks: `bench.noop` (the bare round
trip) and `bench.floor` (the consumer half of the minimal outbox + inbox
design: the inbox check and the inbox row in one durable transaction). The
pool is `solo` (one process, as in the e2e tests).

MODE:

* `shipped`: `Consumer.handle` as it is.
* `nosync`: every connection of this process runs with
  `synchronous_commit = off` (a reference, not a proposal).
* `leasefirst`: `Consumer.handle` with `Consumer.short_queues` empty, so every queue
  takes its lease in a relaxed transaction of its own before the handler
  (the publisher's path, and every queue's before the lease was folded into
  the final transaction).

Completion is signalled the same way on every path: one RPUSH of a JSON
record with wall-clock stamps (time.time(), one clock for every process on
this machine) to the list `bench:done` — bare: at the end of the task body;
handoff and floor: in an after-commit callback, i.e. right after the
consumer's transaction committed. `task_prerun` stamps when the worker started
each task. Inside `Consumer.handle`, a wrapper around the function it calls
before the handler, `claim_lease`, looked up as an attribute of
`outbox.consumer` (no product file is changed), stamps the steps in
between; the worker refuses to start if that name is gone, and
bench/handoff.py refuses a record without the stamps, so a change of
`Consumer.handle` cannot silently turn the phase table into nonsense.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.signals import task_prerun
from kombu import Queue  # type: ignore[attr-defined]

import outbox.consumer as app_module
from orchestrator.bootstrap import build_app
from orchestrator.celery_app import EXCHANGE, make_celery, use_app
from orchestrator.core.config import Settings
from orchestrator.core.routing import TASKS
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import UnitOfWork, unit_of_work
from outbox.handlers import Finalizer
from outbox.inbox import claim
from outbox.messages import Handoff

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import no_flush_wait  # noqa: E402

DONE = "bench:done"
BENCH_QUEUE = "bench"
WRAPPED = ("claim_lease",)

Stamps = dict[str, dict[str, float]]


def stamp_phases(stamps: Stamps) -> None:
    """Wrap `claim_lease` as `Consumer.handle` looks it up (a module attribute)."""
    missing = [name for name in WRAPPED if not hasattr(app_module, name)]
    if missing:
        raise SystemExit(f"outbox.consumer no longer has {missing}: update bench/_handoff_worker.py")
    inner = {name: vars(app_module)[name] for name in WRAPPED}

    def claim_lease(session: Any, work_id: str, holder: str, lease: float) -> int | None:
        mine = stamps.setdefault(holder, {})
        mine["claim"] = time.time()
        try:
            taken: int | None = inner["claim_lease"](session, work_id, holder, lease)
            return taken
        finally:
            mine["claimed"] = time.time()

    app_module.claim_lease = claim_lease


def noop_handler(signals: Any, prerun: dict[str, float], stamps: Stamps) -> Callable[..., Finalizer]:
    def handler(handoff: Handoff, holder: str) -> Finalizer:
        handler_at = time.time()

        def finalize(uow: UnitOfWork) -> None:
            def signal() -> None:
                record = {
                    "id": holder,
                    "kind": "handoff",
                    "prerun": prerun.pop(holder, None),
                    "handler": handler_at,
                    **stamps.pop(holder, {}),
                    "done": time.time(),
                }
                signals.rpush(DONE, json.dumps(record))

            uow.after_commit(signal)

        return finalize

    return handler


def bench_tasks(celery: Celery, app: Pressroom, signals: Any, prerun: dict[str, float]) -> None:
    @celery.task(name="bench.noop", bind=True, acks_late=True)  # type: ignore[untyped-decorator]
    def bench_noop(self: Any, payload: dict[str, Any]) -> None:
        task_id = str(self.request.id)
        record = {"id": task_id, "kind": "bare", "prerun": prerun.pop(task_id, None), "done": time.time()}
        signals.rpush(DONE, json.dumps(record))

    @celery.task(name="bench.floor", bind=True, acks_late=True)  # type: ignore[untyped-decorator]
    def bench_floor(self: Any, payload: dict[str, Any], message_id: str) -> None:
        started = prerun.pop(message_id, None)
        with unit_of_work(app.engine) as uow:
            if not claim(uow.session, message_id, "bench"):
                return  # a redelivery: applied once already

            def signal() -> None:
                record = {"id": message_id, "kind": "floor", "prerun": started, "done": time.time()}
                signals.rpush(DONE, json.dumps(record))

            uow.after_commit(signal)


def main() -> None:
    import redis

    database_url, broker_url, signal_url, mode, queues = sys.argv[1:6]
    logging.basicConfig(level=logging.WARNING)
    signals = redis.Redis.from_url(signal_url)
    prerun: dict[str, float] = {}
    stamps: Stamps = {}

    @task_prerun.connect  # type: ignore[untyped-decorator]
    def _stamp(task_id: str | None = None, **_: Any) -> None:
        if task_id:
            prerun[task_id] = time.time()

    settings = Settings(database_url=database_url, broker_url=broker_url, secret="bench-secret")
    app = build_app(settings)
    if mode == "nosync":
        app.engine.dispose()
        no_flush_wait(app.engine)
    if mode == "leasefirst":
        app.consumer.short_queues = frozenset()
    handler = noop_handler(signals, prerun, stamps)
    for name in TASKS:
        app.handlers[name] = handler
    stamp_phases(stamps)
    use_app(app)

    celery = make_celery(broker_url)
    celery.conf.task_queues = [
        *celery.conf.task_queues,
        Queue(BENCH_QUEUE, EXCHANGE, routing_key=BENCH_QUEUE),  # type: ignore[no-untyped-call]
    ]
    bench_tasks(celery, app, signals, prerun)
    celery.worker_main(
        [
            "worker",
            "-Q",
            queues,
            "--concurrency",
            "1",
            "--pool",
            "solo",
            "--loglevel",
            "WARNING",
            "-n",
            f"pressroom-bench-{mode}@%h",
            "--without-gossip",
            "--without-mingle",
        ]
    )


if __name__ == "__main__":
    main()

"""What the operators' `/ops` page asks the broker: queue depths and Celery's workers.

- Depths: a passive `queue_declare` per role queue on a connection of the
  worker's own Celery app (on Redis, kombu answers with the `LLEN` of the
  queue's lists; on RabbitMQ, the queue's message count). A queue the broker
  does not know yet holds nothing.
- Workers: Celery's remote control (`inspect().ping`, then `stats` and
  `active` from the workers that answered), each broadcast waiting at most
  `TIMEOUT` seconds. Nothing here keeps a registry of its own: a worker is
  listed because it answered just now.
- The inline broker has no separate workers (`pressroom demo`, tests): the
  page says so instead of asking.

Every failure to reach the broker becomes a line on the page (`problem`),
never an error page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator import saga_log
from orchestrator.core.routing import QUEUES
from outbox.broker import Broker, CeleryBroker, InlineBroker

TIMEOUT = 1.0  # seconds each broadcast or connection attempt may take


@dataclass(frozen=True)
class InFlight:
    task: str
    saga_id: str | None
    started: float | None  # the worker's clock, seconds since the epoch


@dataclass(frozen=True)
class Worker:
    name: str
    pool: str
    concurrency: int | None
    uptime: int | None
    in_flight: tuple[InFlight, ...]


@dataclass(frozen=True)
class BrokerView:
    kind: str  # "celery", "inline" or "none"
    depths: dict[str, int | None] = field(default_factory=dict)
    workers: tuple[Worker, ...] = ()
    problem: str | None = None


def _depths(celery: Any, queues: Sequence[str]) -> dict[str, int | None]:
    depths: dict[str, int | None] = {}
    with celery.connection_for_read(connect_timeout=TIMEOUT) as conn:
        conn.ensure_connection(max_retries=1, timeout=TIMEOUT)
        for queue in queues:
            channel = conn.channel()
            try:
                depths[queue] = int(channel.queue_declare(queue=queue, passive=True).message_count)
            except conn.channel_errors:
                depths[queue] = 0  # not declared yet: nothing was ever sent to it
            finally:
                try:
                    channel.close()
                except Exception:  # noqa: BLE001 (a channel the broker closed on a 404)
                    pass
    return depths


def _in_flight(tasks: Sequence[dict[str, Any]]) -> tuple[InFlight, ...]:
    out = []
    for task in tasks:
        args = task.get("args")
        kwargs = task.get("kwargs")
        saga = saga_log.saga_of(
            args if isinstance(args, list | tuple) else None, kwargs if isinstance(kwargs, dict) else None
        )
        started = task.get("time_start")
        out.append(
            InFlight(
                str(task.get("name")), saga, float(started) if isinstance(started, int | float) else None
            )
        )
    return tuple(out)


def _workers(celery: Any) -> tuple[Worker, ...]:
    pings = celery.control.inspect(timeout=TIMEOUT).ping() or {}
    if not pings:
        return ()
    asked = celery.control.inspect(destination=sorted(pings), timeout=TIMEOUT, limit=len(pings))
    stats = asked.stats() or {}
    active = asked.active() or {}
    workers = []
    for name in sorted(pings):
        info = stats.get(name) or {}
        pool = info.get("pool") or {}
        concurrency = pool.get("max-concurrency")
        workers.append(
            Worker(
                name=name,
                pool=str(pool.get("implementation", "?")).rsplit(".", 1)[-1].replace(":TaskPool", ""),
                concurrency=int(concurrency) if isinstance(concurrency, int) else None,
                uptime=int(info["uptime"]) if isinstance(info.get("uptime"), int | float) else None,
                in_flight=_in_flight(active.get(name) or []),
            )
        )
    return tuple(workers)


def read_broker(broker: Broker, queues: Sequence[str] = QUEUES) -> BrokerView:
    """Queue depths and the workers that answer, from the Pressroom's broker (blocking, ≤ a few seconds)."""
    if isinstance(broker, InlineBroker):
        return BrokerView("inline", depths={q: None for q in queues})
    if not isinstance(broker, CeleryBroker):
        return BrokerView("none", depths={q: None for q in queues}, problem="no broker is configured")
    celery = broker.app
    try:
        depths = _depths(celery, queues)
    except Exception as exc:  # noqa: BLE001 (kombu raises many connection error types)
        return BrokerView(
            "celery", depths={q: None for q in queues}, problem=f"the broker did not answer: {exc}"
        )
    try:
        workers = _workers(celery)
    except Exception as exc:  # noqa: BLE001
        return BrokerView("celery", depths=depths, problem=f"the workers could not be asked: {exc}")
    return BrokerView("celery", depths=depths, workers=workers)


__all__ = ["TIMEOUT", "BrokerView", "InFlight", "Worker", "read_broker"]

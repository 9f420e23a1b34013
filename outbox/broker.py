"""The `Broker` port and its adapters.

* `CeleryBroker`: `send_task` by name to the role queue, the outbox row id as
  the task id, the trace context in the message headers.
* `InlineBroker`: an in-process FIFO. `pressroom demo` drains it with worker
  threads; the CLI's default (`inline://`) drains it before the command ends.
* `NullBroker`: refuses every send, so rows stay in the outbox for a relay.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from outbox.messages import Envelope


class BrokerUnavailable(RuntimeError):
    """The broker did not take the message; the row stays unsent."""


class Broker(Protocol):
    system: str

    def send(self, envelope: Envelope) -> None: ...


class CeleryBroker:
    def __init__(self, app: Any, system: str) -> None:
        self.app = app
        self.system = system

    def send(self, envelope: Envelope) -> None:
        try:
            self.app.send_task(
                envelope.task,
                args=[envelope.payload],
                kwargs={"message_id": envelope.message_id, "headers": envelope.headers},
                queue=envelope.queue,
                task_id=envelope.message_id,
                headers=dict(envelope.headers),
                retry=False,
            )
        except Exception as exc:  # kombu raises many connection error types
            raise BrokerUnavailable(f"broker refused {envelope.message_id}: {exc}") from exc


class InlineBroker:
    system = "inline"

    def __init__(self) -> None:
        self.queue: queue.Queue[Envelope] = queue.Queue()
        self._lock = threading.Lock()
        self._seen: set[str] = set()

    def send(self, envelope: Envelope) -> None:
        with self._lock:
            if envelope.message_id in self._seen:
                return  # the eager send and the relay may both offer a row
            self._seen.add(envelope.message_id)
        self.queue.put(envelope)

    def drain(self, handle: Callable[[Envelope], None]) -> int:
        """Handle queued messages, in this thread, until none are left."""
        handled = 0
        while True:
            try:
                envelope = self.queue.get_nowait()
            except queue.Empty:
                return handled
            handle(envelope)
            handled += 1


class NullBroker:
    system = "none"

    def send(self, envelope: Envelope) -> None:
        raise BrokerUnavailable("no broker configured")


__all__ = ["Broker", "BrokerUnavailable", "CeleryBroker", "InlineBroker", "NullBroker"]

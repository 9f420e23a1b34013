"""The saga id in a worker's log lines: `saga=<id>` on every line logged while a task runs.

`task_started(args, kwargs)` (called from Celery's `task_prerun`) reads the
saga id from the task's handoff (its one positional argument, or the
`payload` keyword) and keeps it in a context variable until `task_ended()`
(`task_postrun`); `SagaField`, a logging filter set on the worker's
handlers, gives every record a `saga` attribute: ``"saga=<id> "`` inside a
task, ``""`` outside one. The worker's log formats print ``%(saga)s``.

The id comes from a message body, so only an id of the shape Pressroom makes
(letters, digits, `-` and `_`, at most 64) is printed; anything else shows as
``saga=? `` and cannot forge a log line. No I/O.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

_SAGA_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_current: ContextVar[str | None] = ContextVar("pressroom_task_saga", default=None)

WORKER_LOG_FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(saga)s%(message)s"
WORKER_TASK_LOG_FORMAT = (
    "[%(asctime)s: %(levelname)s/%(processName)s] %(task_name)s[%(task_id)s]: %(saga)s%(message)s"
)


def saga_of(args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None) -> str | None:
    """The saga id a task's handoff names: "?" for one that is not an id, None for no handoff."""
    payload = args[0] if args else (kwargs or {}).get("payload")
    if not isinstance(payload, Mapping) or "saga_id" not in payload:
        return None
    saga_id = payload["saga_id"]
    return saga_id if isinstance(saga_id, str) and _SAGA_ID.fullmatch(saga_id) else "?"


def task_started(args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None) -> None:
    _current.set(saga_of(args, kwargs))


def task_ended() -> None:
    _current.set(None)


class SagaField(logging.Filter):
    """Adds `saga` to every record: ``"saga=<id> "`` while a task of a saga runs, else ``""``."""

    def filter(self, record: logging.LogRecord) -> bool:
        saga_id = _current.get()
        record.saga = f"saga={saga_id} " if saga_id else ""
        return True


def add_saga_field(logger: logging.Logger) -> None:
    """Put one `SagaField` on each of `logger`'s handlers (once)."""
    for handler in logger.handlers:
        if not any(isinstance(f, SagaField) for f in handler.filters):
            handler.addFilter(SagaField())


__all__ = [
    "WORKER_LOG_FORMAT",
    "WORKER_TASK_LOG_FORMAT",
    "SagaField",
    "add_saga_field",
    "saga_of",
    "task_ended",
    "task_started",
]

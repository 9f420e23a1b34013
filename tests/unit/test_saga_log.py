"""`saga=<id>` on a worker's log lines: read from the task's handoff, only while the
task runs, and never a forged line from a hostile id."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from orchestrator import saga_log


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(saga)s%(message)s"))
    logger = logging.getLogger("test.saga_log")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    saga_log.add_saga_field(logger)
    saga_log.add_saga_field(logger)  # twice: still one field
    yield logger, out
    logger.removeHandler(handler)
    saga_log.task_ended()


def test_the_saga_id_comes_from_the_handoff() -> None:
    assert saga_log.saga_of([{"saga_id": "abc123", "work_id": "w"}], {}) == "abc123"
    assert saga_log.saga_of([], {"payload": {"saga_id": "k-1_2"}}) == "k-1_2"
    assert saga_log.saga_of(["not a handoff"], {}) is None
    assert saga_log.saga_of(None, None) is None
    assert saga_log.saga_of([{"saga_id": "x\nINFO forged"}], {}) == "?"
    assert saga_log.saga_of([{"saga_id": 7}], {}) == "?"
    assert saga_log.saga_of([{"saga_id": "a" * 65}], {}) == "?"


def test_lines_name_the_saga_only_while_its_task_runs(logged: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = logged
    logger.info("before")
    saga_log.task_started([{"saga_id": "5f3a", "work_id": "w"}], {"message_id": "m"})
    logger.info("working")
    saga_log.task_ended()
    logger.info("after")
    saga_log.task_started(["poison"], {})
    logger.info("no handoff")
    assert out.getvalue().splitlines() == [
        "INFO before",
        "INFO saga=5f3a working",
        "INFO after",
        "INFO no handoff",
    ]
    handler = logger.handlers[0]
    assert sum(isinstance(f, saga_log.SagaField) for f in handler.filters) == 1

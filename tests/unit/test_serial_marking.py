"""Which test modules `make test` runs in its serial part (tests/conftest.py SERIAL_HELPERS)."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import _uses_serial_helpers


@pytest.mark.parametrize(
    ("module", "serial"),
    [
        ("tests.integration.test_worker_pools", True),  # relays and workers: `Processes`
        ("tests.integration.test_recovery", True),  # and a throwaway redis-server
        ("tests.integration.test_outage", True),  # a PostgreSQL server it kills
        ("tests.e2e.test_hostile_integers", False),  # one `pressroom serve` / `mcp`: `Proc`
        ("tests.integration.test_sent_marks", False),  # a command and `wait_until`
        ("tests.e2e.test_web_review", False),
    ],
)
def test_modules_that_start_relays_workers_or_kill_servers_are_serial(module: str, serial: bool) -> None:
    assert _uses_serial_helpers(importlib.import_module(module)) is serial

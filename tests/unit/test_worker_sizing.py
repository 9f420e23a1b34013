"""A worker process's database pool follows its pool of threads unless it is set; its turns that
wait on a model run on a waiting loop per thread, up to `WAITING_DELIVERIES` at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.config import Settings
from orchestrator.entrypoints.processes import sized_settings, worker_app
from orchestrator.entrypoints.worker_pools import (
    CONNECTIONS_PER_THREAD,
    PUBLISHER_CONCURRENCY,
    WAITING_DELIVERIES,
    db_pool_size,
    destination_limit,
)
from orchestrator.store.db import dispose_all


def test_a_threads_pool_keeps_connections_for_every_thread() -> None:
    assert db_pool_size("threads", 8, 5, explicit=False) == 8 * CONNECTIONS_PER_THREAD
    assert db_pool_size("threads", 1, 5, explicit=False) == 5  # never below the configured size


def test_other_pools_and_a_set_size_keep_the_configured_size() -> None:
    assert db_pool_size("prefork", 8, 5, explicit=False) == 5
    assert db_pool_size("solo", 1, 7, explicit=False) == 7
    assert db_pool_size("threads", 8, 4, explicit=True) == 4


def test_the_worker_settings_size_the_pool_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRESSROOM_DB_POOL_SIZE", raising=False)
    assert sized_settings(Settings(), "threads", 8).db_pool_size == 16
    assert sized_settings(Settings(), "prefork", 1).db_pool_size == 5
    monkeypatch.setenv("PRESSROOM_DB_POOL_SIZE", "6")
    assert sized_settings(Settings(), "threads", 8).db_pool_size == 6


def test_a_pool_size_out_of_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESSROOM_DB_POOL_SIZE", "0")
    with pytest.raises(ValueError, match="db_pool_size"):
        Settings()


def test_one_destination_takes_at_most_half_of_a_threads_pool_unless_set() -> None:
    assert destination_limit("threads", 16, 8, explicit=False) == 8
    assert destination_limit("threads", 32, 8, explicit=False) == 8  # never above the configured limit
    assert destination_limit("threads", 4, 8, explicit=False) == 2
    assert destination_limit("threads", 1, 8, explicit=False) == 1
    assert destination_limit("threads", 4, 6, explicit=True) == 6  # the operator's setting wins
    assert destination_limit("solo", 1, 8, explicit=False) == 8


def test_the_worker_settings_size_the_destination_limit_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PRESSROOM_DESTINATION_CONCURRENCY", raising=False)
    assert sized_settings(Settings(), "threads", PUBLISHER_CONCURRENCY).destination_concurrency == 8
    assert sized_settings(Settings(), "threads", 6).destination_concurrency == 3
    monkeypatch.setenv("PRESSROOM_DESTINATION_CONCURRENCY", "5")
    assert sized_settings(Settings(), "threads", 6).destination_concurrency == 5


def test_a_worker_runs_turns_waiting_on_a_model_on_a_loop_per_thread(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'worker.db'}",
        broker_url="none://",
        secret="s",
        secret_file=tmp_path / "secret",
    )
    for pool, concurrency, loops in (("threads", 4, 4), ("solo", 1, 1), ("prefork", 3, 1)):
        app = worker_app(settings, pool, concurrency)
        try:
            waits = app.consumer.waits
            assert waits is not None and (waits.threads, waits.capacity) == (loops, WAITING_DELIVERIES)
        finally:
            app.close()
    dispose_all()
    assert WAITING_DELIVERIES == 256  # docs/deploy.md says so

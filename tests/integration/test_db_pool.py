"""`PRESSROOM_DB_POOL_SIZE`: the PostgreSQL connections a process keeps open between bursts."""

from __future__ import annotations

import contextlib

import pytest
from sqlalchemy import text

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings


def _backends(url: str) -> int:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("size", [3, 8])
def test_the_pool_keeps_its_size_and_closes_what_overflowed(
    pg_url: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRESSROOM_DB_POOL_SIZE", str(size))
    app = build_app(Settings(database_url=pg_url, broker_url="none://", secret="s"))
    app.engine.dispose()
    burst = 8  # at most the pool plus its 5 overflow connections
    with contextlib.ExitStack() as held:
        conns = [held.enter_context(app.engine.connect()) for _ in range(burst)]
        for conn in conns:
            assert conn.execute(text("SELECT 1")).scalar() == 1
        assert _backends(pg_url) == burst
    # Returned: the pool keeps `size` of them open, the overflow ones are closed.
    assert _backends(pg_url) == min(size, burst)

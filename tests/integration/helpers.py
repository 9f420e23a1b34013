"""In-process saga helpers for integration tests (real database, real files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from orchestrator.bootstrap import build_app
from orchestrator.core.clock import Clock
from orchestrator.core.config import Settings
from orchestrator.pressroom import Pressroom
from tests.support.processes import wait_until


def make_app(db_url: str, tmp_path: Path, *, clock: Clock | None = None, **settings: Any) -> Pressroom:
    values: dict[str, Any] = {
        "database_url": db_url,
        "broker_url": "inline://",
        "secret": "integration-secret",
        "destination_timeout": 0.5,
        "secret_file": tmp_path / "secret",
    }
    values.update(settings)
    return build_app(Settings(**values), memory_destinations=True, clock=clock)


def ready_saga(
    app: Pressroom, corpus: Path, dests: list[str], brief: str = "history of the library network"
) -> dict[str, Any]:
    """Submit and run research, writing and review in-process: a saga in ready-for-review."""
    status = app.submissions.submit(brief=brief, corpus=str(corpus), destinations=dests, actor="dana")
    assert status["state"] == "ready-for-review", status
    return status


def tools_called(app: Pressroom, saga_id: str, tool: str) -> list[str]:
    events = app.reads.history(saga_id)["events"]
    return [e["status"] for e in events if e["kind"] == "tool_call" and e["tool"] == tool]


def wait_for_a_lock_wait(engine: Engine, what: str) -> None:
    """Until some transaction of `engine`'s PostgreSQL server waits for a lock (`pg_locks`)."""

    def waiting() -> bool:
        with engine.connect() as conn:
            return bool(conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar())

    wait_until(waiting, timeout=10, every=0.02, what=what)

"""Every saga a test touched must explain itself: `audit verify` after each test.

`watch()` listens (class-wide, in the test process only) for every engine
that opens a connection; `check()` then runs `orchestrator.audit.verify` on
every saga of every such database and returns the problems found. Engines
are kept by URL, the last one seen for a URL standing for it (an in-memory
SQLite database is only reachable through its own engine).

Event links are keyed: a saga is checked with the chain key this process holds
for its database (an app built here), then the unconfigured key of a store used
alone, and, when neither fits, with the key of the suite's console-script
runs (`PRESSROOM_SECRET=test-signing-key`, `tests.conftest.base_env`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, Engine

CLI_SECRET = b"test-signing-key"
_engines: dict[str, Engine] = {}
_listening = False


def _seen(conn: Connection, *_: Any) -> None:
    engine = conn.engine
    _engines[engine.url.render_as_string(hide_password=False)] = engine


def watch() -> None:
    """Forget what earlier tests opened and (once) start listening."""
    global _listening
    _engines.clear()
    if not _listening:
        event.listen(Engine, "engine_connect", _seen)
        _listening = True


def check() -> list[str]:
    """Every audit problem of every saga in the databases opened since `watch()`."""
    from orchestrator import audit
    from orchestrator.harness.event_chain import chain_key
    from orchestrator.store.chain_keys import UNCONFIGURED_KEY, key_of

    engines = list(_engines.values())
    _engines.clear()
    problems: list[str] = []
    for engine in engines:
        if not inspect(engine).has_table("sagas"):
            continue
        with engine.connect() as conn:
            ids = [row[0] for row in conn.execute(text("SELECT id FROM sagas ORDER BY created_at"))]
        # A test may write some sagas through a store alone (the unconfigured key) before it
        # builds an app on the same database (whose key this process then holds for it).
        keys = list(dict.fromkeys([key_of(engine), UNCONFIGURED_KEY, chain_key(CLI_SECRET)]))
        for saga_id in ids:
            reports = [audit.verify(engine, saga_id, key=key) for key in keys]
            report = next((r for r in reports if r["ok"]), reports[0])
            problems += [f"saga {saga_id} ({engine.url.database}): {p}" for p in report["problems"]]
    _engines.clear()
    return problems


__all__ = ["check", "watch"]

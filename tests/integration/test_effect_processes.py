"""The tamper check with the publisher as its own process, on PostgreSQL and Redis.

`pressroom approve` runs with no broker, so the publish message waits in the
outbox with no publisher running; the approved version's bytes are then
rewritten in SQL; then `pressroom relay` and a `publisher` worker start.
Nothing with the tampered bytes reaches the site folder, the git repository
or the recording webhook server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from sqlalchemy import text
from sqlmodel import Session

from orchestrator.store.db import make_engine
from tests.conftest import base_env
from tests.support.processes import Processes, cli_json, saga_state, wait_until
from tests.support.webhook_server import WebhookServer

TAMPERED = "Sent by whoever can write to the versions table."


def test_publisher_started_after_a_sql_tamper_sends_nothing(
    pg_url: str, redis_url: str, tmp_path: Path, corpus: Path
) -> None:
    site, repo = tmp_path / "site", tmp_path / "repo"
    inline = base_env(PRESSROOM_DATABASE_URL=pg_url, PRESSROOM_BROKER_URL="inline://")
    with WebhookServer() as hook:
        saga = cli_json(
            inline,
            "submit",
            "--brief",
            "history of the library network",
            "--corpus",
            str(corpus),
            "--dest",
            f"site:{site}",
            "--dest",
            f"git:{repo}",
            "--dest",
            f"webhook:{hook.url}",
            "--as",
            "dana",
        )
        sid = saga["saga_id"]
        assert saga["state"] == "ready-for-review", saga
        held = {**inline, "PRESSROOM_BROKER_URL": "none://"}
        cli_json(held, "approve", sid, "--version", "1", "--as", "erin")
        assert saga_state(inline, sid) == "approved"

        engine = make_engine(pg_url)
        with Session(engine) as s:
            s.execute(
                text("UPDATE versions SET markdown = :md WHERE saga_id = :sid"),
                {"md": f"# Tampered\n\n{TAMPERED}\n", "sid": sid},
            )
            s.commit()
        engine.dispose()

        env = base_env(
            PRESSROOM_DATABASE_URL=pg_url,
            PRESSROOM_BROKER_URL=redis_url,
            PRESSROOM_RELAY_POLL="0.2",
            PRESSROOM_RELAY_GRACE="0.2",
        )
        procs = Processes(env, tmp_path)
        try:
            procs.worker("publisher", queues="publisher")
            procs.relay()
            wait_until(
                lambda: saga_state(inline, sid) == "failed", timeout=120, what="the publisher to refuse"
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{procs.logs()}") from None
        finally:
            procs.stop_all()
        assert hook.received == []
    status = cli_json(inline, "status", sid)
    assert "integrity" in status["reason"], status
    assert not site.exists() or TAMPERED not in "".join(p.read_text() for p in site.rglob("*") if p.is_file())
    assert not list(site.glob("*.md"))
    if (repo / ".git").exists():
        log = subprocess.run(["git", "-C", str(repo), "log", "--all", "-p"], capture_output=True, text=True)
        assert TAMPERED not in log.stdout and log.stdout == ""

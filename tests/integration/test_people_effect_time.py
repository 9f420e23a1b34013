"""An approval is honoured only if its approver is still an active reviewer when the
publish step commits its intent (DESIGN.md "People and permissions").

The approval is given while no publisher runs, so its publish message waits;
then the approver is revoked (or loses `reviewer`); then the publisher starts.
Two topologies: separate processes on PostgreSQL + Redis (a real
`pressroom worker --queues publisher` started after the change), and SQLite
with the in-process broker holding the message back (`none://`) until an
in-process app delivers it. A recording webhook server is the destination:
it must see no request at all.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PRESSROOM, base_env
from tests.integration.helpers import make_app
from tests.support import in_process
from tests.support.processes import Processes, saga_state, wait_until
from tests.support.webhook_server import WebhookServer

BRIEF = "history of the library network"
# An admin grants only roles they hold, so the first one holds those it hands out.
GRANTS = ("admin", "author", "reviewer")


def run(env: dict[str, str], *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**env, **({"PRESSROOM_TOKEN": token} if token else {})}
    return subprocess.run([PRESSROOM, *args], env=env, capture_output=True, text=True, timeout=120)


def run_json(env: dict[str, str], *args: str, token: str | None = None) -> dict[str, Any]:
    done = run(env, *args, "--json", token=token)
    assert done.returncode == 0, f"{args}: exit {done.returncode}: {done.stderr}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def people_and_saga(env: dict[str, str], corpus: Path, dest: str) -> tuple[dict[str, str], str]:
    """admin, dana (author) and erin (reviewer); a saga by dana in ready-for-review. Made in
    this process (agents included), on the database the commands and processes below use."""
    inline, cwd = {**env, "PRESSROOM_BROKER_URL": "inline://"}, corpus.parent
    others = {"dana": ["author"], "erin": ["reviewer"]}
    tokens = in_process.add_people(inline, cwd, others, admin_roles=GRANTS)
    sid = in_process.submit(
        inline, cwd, brief=BRIEF, corpus=corpus, destinations=[dest], token=tokens["dana"]
    )
    return tokens, sid


def take_away(env: dict[str, str], how: str, admin: str) -> None:
    args = ("users", "revoke", "erin") if how == "revoked" else ("users", "roles", "erin", "--role", "author")
    done = run(env, *args, token=admin)
    assert done.returncode == 0, done.stderr


def check_not_published(
    status: dict[str, Any], history: dict[str, Any], hook: WebhookServer, how: str
) -> None:
    assert hook.requests == {}, f"the destination was called: {dict(hook.requests)}"
    assert status["state"] == "ready-for-review", status
    reasons = [
        str(e.get("detail", {}).get("reason") or e.get("reason") or "")
        for e in history["events"]
        if e["kind"] in ("transition", "tool_call")
    ]
    why = "was revoked" if how == "revoked" else "no longer holds the reviewer role"
    assert any(why in r for r in reasons), reasons
    assert status["destinations"][0]["state"] != "done"


@pytest.fixture
def procs(tmp_path: Path, pg_url: str, redis_url: str):  # type: ignore[no-untyped-def]
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS="30",
        PRESSROOM_DESTINATION_TIMEOUT="2",
    )
    p = Processes(env, tmp_path)
    yield p
    p.stop_all()


@pytest.mark.parametrize("how", ["revoked", "role dropped"])
def test_separate_processes_publisher_started_after_the_change(
    procs: Processes, corpus: Path, how: str
) -> None:
    env = procs.env
    with WebhookServer() as hook:
        tokens, sid = people_and_saga(env, corpus, f"webhook:{hook.url}")
        approval = run_json(env, "approve", sid, "--version", "1", token=tokens["erin"])  # queued on Redis
        assert approval["approver"] == "erin"
        assert saga_state(env | {"PRESSROOM_TOKEN": tokens["admin"]}, sid) == "approved"
        take_away(env, how, tokens["admin"])
        procs.worker("publisher", "publisher")
        admin_env = env | {"PRESSROOM_TOKEN": tokens["admin"]}
        try:
            wait_until(lambda: saga_state(admin_env, sid) != "approved", timeout=90, what="the publisher")
            wait_until(
                lambda: saga_state(admin_env, sid) == "ready-for-review", timeout=30, what="ready-for-review"
            )
        except AssertionError:
            print(procs.logs())
            raise
        status = run_json(admin_env, "status", sid)
        history = run_json(admin_env, "history", sid)
        check_not_published(status, history, hook, how)


@pytest.mark.parametrize("how", ["revoked", "role dropped"])
def test_sqlite_publish_message_held_back_then_delivered(tmp_path: Path, corpus: Path, how: str) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = base_env(
        PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="none://", PRESSROOM_SECRET="integration-secret"
    )
    with WebhookServer() as hook:
        tokens, sid = people_and_saga(env, corpus, f"webhook:{hook.url}")
        run_json(
            env, "approve", sid, "--version", "1", token=tokens["erin"]
        )  # the message waits in the outbox
        take_away(env, how, tokens["admin"])
        app = make_app(url, tmp_path)  # the publisher starts: the held message is delivered
        app.relay.run_once()
        app.consumer.drain()
        admin_env = env | {"PRESSROOM_TOKEN": tokens["admin"]}
        check_not_published(
            run_json(admin_env, "status", sid), run_json(admin_env, "history", sid), hook, how
        )
        # a reviewer who still holds the role approves again, and it publishes once
        grace = run_json(env, "users", "add", "grace", "--role", "reviewer", token=tokens["admin"])["token"]
        run_json({**env, "PRESSROOM_BROKER_URL": "inline://"}, "approve", sid, "--version", "1", token=grace)
        assert run_json(admin_env, "status", sid)["state"] == "succeeded"
        assert hook.posts == 1


def test_an_unchanged_approver_publishes(tmp_path: Path, corpus: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = base_env(
        PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="none://", PRESSROOM_SECRET="integration-secret"
    )
    with WebhookServer() as hook:
        tokens, sid = people_and_saga(env, corpus, f"webhook:{hook.url}")
        run_json(env, "approve", sid, "--version", "1", token=tokens["erin"])
        app = make_app(url, tmp_path)
        app.relay.run_once()
        app.consumer.drain()
        assert run_json(env, "status", sid, token=tokens["erin"])["state"] == "succeeded"
        assert hook.posts == 1


def test_an_approval_given_in_open_mode_lapses_once_people_are_added(tmp_path: Path, corpus: Path) -> None:
    """Approved by a free-text name while no user existed; the first user added closes the
    install before the publisher runs: that approval carries no person, so nothing is sent."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = base_env(
        PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="none://", PRESSROOM_SECRET="integration-secret"
    )
    with WebhookServer() as hook:
        inline = {**env, "PRESSROOM_BROKER_URL": "inline://"}
        saga = run_json(
            inline, "submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", f"webhook:{hook.url}"
        )
        sid = saga["saga_id"]
        run_json(env, "approve", sid, "--version", "1", "--as", "erin")  # the message waits in the outbox
        admin = run_json(env, "users", "add", "admin", "--role", "admin")["token"]
        app = make_app(url, tmp_path)
        app.relay.run_once()
        app.consumer.drain()
        status = run_json(env, "status", sid, token=admin)
        history = run_json(env, "history", sid, token=admin)
        assert hook.requests == {}, f"the destination was called: {dict(hook.requests)}"
        assert status["state"] == "ready-for-review", status
        reasons = [str(e.get("detail", {}).get("reason") or "") for e in history["events"]]
        assert any("approver erin is not a user (approved without one)" in r for r in reasons), reasons

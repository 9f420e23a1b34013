"""Poison messages sent to the real broker (Redis) reach a running worker
process; each becomes a dead letter with its body and reason, listed by
`pressroom dead-letters`, and `requeue` sends one again through the outbox."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from orchestrator.celery_app import make_celery
from tests.conftest import base_env
from tests.support.processes import PRESSROOM, Processes, cli_json, submit, wait_until


@pytest.fixture
def procs(tmp_path: Path, pg_url: str, redis_url: str):  # type: ignore[no-untyped-def]
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
    )
    p = Processes(env, tmp_path)
    yield p
    p.stop_all()


def letters(env: dict[str, str]) -> list[dict]:  # type: ignore[type-arg]
    return list(cli_json(env, "dead-letters")["dead_letters"])


def letter_messages(env: dict[str, str]) -> set[str]:
    """The message ids of the dead letters, read from the database directly: the waits poll
    this, where a `pressroom dead-letters` process per poll would take a core from the worker
    under test (the command's listing is read once the letters are there)."""
    engine = create_engine(env["PRESSROOM_DATABASE_URL"], poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return {str(m) for m in conn.execute(text("SELECT message_id FROM dead_letters")).scalars()}
    finally:
        engine.dispose()


def test_poison_messages_become_dead_letters(procs: Processes, corpus: Path, tmp_path: Path) -> None:
    env = procs.env
    # A real saga, stopped before any worker runs (no worker, no relay yet): its id
    # lets one poison message name a saga that exists.
    sid = submit(env, corpus, f"site:{tmp_path / 'site'}", actor="dana")
    celery = make_celery(env["PRESSROOM_BROKER_URL"])
    celery.send_task(
        "pressroom.researcher.research", args=["not a handoff"], queue="researcher", task_id="poison-text"
    )
    celery.send_task(
        "pressroom.researcher.research",
        args=[{"saga_id": sid, "work_id": "w", "round": "oops"}],
        kwargs={"message_id": "poison-type"},
        queue="researcher",
        task_id="poison-type",
    )
    celery.send_task(
        "pressroom.researcher.nonsense", args=[{"saga_id": sid}], queue="researcher", task_id="poison-unknown"
    )
    worker = procs.worker("worker-researcher", "researcher")
    try:
        wait_until(lambda: len(letter_messages(env)) >= 3, timeout=90, what="3 dead letters")
    except AssertionError:
        print(procs.logs())
        raise
    found = letters(env)
    by_message = {d["message_id"]: d for d in found}
    text = by_message["poison-text"]
    assert text["body"]["args"] == ["not a handoff"] and "malformed message" in text["reason"]
    mistyped = by_message["poison-type"]
    assert (
        mistyped["saga_id"] == sid and mistyped["body"]["round"] == "oops" and "round" in mistyped["reason"]
    )
    unknown = by_message["poison-unknown"]
    assert unknown["task"] == "pressroom.researcher.nonsense" and "is registered" in unknown["reason"]
    events = cli_json(env, "history", sid)["events"]
    assert any(e["kind"] == "message" and e["status"] == "dead-letter" for e in events)
    assert worker.popen.poll() is None, "a poison message does not stop the worker"

    # Requeue: the body goes out again through the outbox (sent at once), the worker
    # sets the copy aside again (its cause is not fixed), and a second requeue is refused.
    again = cli_json(env, "dead-letters", "requeue", mistyped["id"], "--as", "olga")
    assert again["requeued_by"] == "olga" and again["requeued_as"]
    wait_until(lambda: again["requeued_as"] in letter_messages(env), timeout=60, what="the requeued copy")
    assert any(d["message_id"] == again["requeued_as"] for d in letters(env))
    twice = subprocess.run(
        [PRESSROOM, "dead-letters", "requeue", mistyped["id"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert twice.returncode == 4 and "requeued already" in twice.stderr
    unsendable = subprocess.run(
        [PRESSROOM, "dead-letters", "requeue", unknown["id"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unsendable.returncode == 4 and "no task a worker runs" in unsendable.stderr
    listing = subprocess.run([PRESSROOM, "dead-letters"], env=env, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and mistyped["id"] in listing.stdout
    assert json.loads(
        subprocess.run(
            [PRESSROOM, "dead-letters", "--json"], env=env, capture_output=True, text=True, timeout=60
        ).stdout
    )["dead_letters"]

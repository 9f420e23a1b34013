"""A slow receiver never makes Pressroom undo work the receiver goes on to store.

Reported: a receiver answered the status GET with 404 while the POST was still
being processed; Pressroom recorded "not applied", failed the saga and undid
the site page, and the receiver then stored the document and never got a
DELETE. With the protocol's in-flight answer (409, read as unknown) the saga
waits in `effect-unknown` for a person, the site page stays, and the person's
`reconcile` finishes it. Everything runs through the console script against
the reference receiver (`examples/webhook_receiver.py`) as its own process.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import Cli, base_env
from tests.support.webhook_server import ReferenceReceiver

DESTINATION_TIMEOUT = 1.0
PROCESSING = 4.0  # the receiver's work on each POST, longer than the timeout


def test_a_post_still_processed_leaves_the_saga_effect_unknown_and_the_site_in_place(
    tmp_path: Path, corpus: Path, sqlite_url: str
) -> None:
    cli = Cli(
        base_env(
            PRESSROOM_DATABASE_URL=sqlite_url,
            PRESSROOM_BROKER_URL="inline://",
            PRESSROOM_DESTINATION_TIMEOUT=str(DESTINATION_TIMEOUT),
        ),
        tmp_path,
    )
    site = tmp_path / "site"
    with ReferenceReceiver(tmp_path, delay=PROCESSING) as receiver:
        hook = f"webhook:{receiver.url()}"
        args = ["submit", "--brief", "history of the library network", "--corpus", str(corpus)]
        sid = cli.json(*args, "--dest", f"site:{site}", "--dest", hook, "--as", "dana")["saga_id"]

        approved = cli.run("approve", sid, "--version", "1", "--as", "erin", "--json")
        assert approved.returncode == 6 and "ended effect-unknown" in approved.stderr
        status = cli.json("status", sid)
        assert status["state"] == "effect-unknown"
        steps = {d["uri"]: d for d in status["destinations"]}
        assert steps[f"site:{site}"]["state"] == "done"
        assert steps[hook]["state"] == "uncertain"
        assert "409" in status["reason"], "the status probe was answered 'still processing'"
        key = steps[hook]["idempotency_key"]
        assert receiver.keys("in-flight") == [key], "the probe came while the POST was processed"

        deadline = time.monotonic() + PROCESSING + 10
        while key not in receiver.stored() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert receiver.stored() == {key}, "the receiver stored the document after all"
        assert receiver.keys("undone") == [], "and was never asked to undo it"
        page = Path(steps[f"site:{site}"]["receipt"]["path"])
        assert page.exists(), "the site page was not undone"
        assert cli.json("status", sid)["state"] == "effect-unknown", "nothing moved on by itself"

        cli.json(
            "reconcile", sid, "--dest", hook, "--outcome", "confirmed", "--as", "olga",
            "--reason", "the receiver's journal holds the document",
        )  # fmt: skip
        done = cli.json("status", sid)
        assert done["state"] == "succeeded" and page.exists() and receiver.stored() == {key}
        assert [e["event"] for e in receiver.journal()].count("received") == 1, "never sent twice"


def test_the_receiver_refuses_a_post_that_arrives_after_its_404(tmp_path: Path) -> None:
    """The receiver's half of the promise, over plain HTTP: once a key's status was 404,
    a POST with that key is refused and stores nothing."""
    import httpx

    with ReferenceReceiver(tmp_path) as receiver:
        headers = {"Idempotency-Key": "saga-x:webhook:1"}
        assert httpx.get(receiver.url(), headers=headers, timeout=5).status_code == 404
        late = httpx.post(receiver.url(), headers=headers, json={"title": "late"}, timeout=5)
        assert late.status_code == 410 and "burned" in json.loads(late.text)["error"]
        assert receiver.stored() == set()
        assert httpx.get(receiver.url(), headers=headers, timeout=5).status_code == 404

"""Reproduction of the chaos finding "review stopped: waiting for a person: uncertain".

A reviewer that dies while `review.record` runs (after the engine committed the
call's intent, a `pending` ledger row, and before it recorded the result) leaves
a `pending` row behind. When the lease brings the review back, the engine finds
that row with its claim run out and asks the tool's status; `review.record`
(risk `reversible_write`, keyed, idempotent) has no status probe, so the answer
is "unknown", the call is `uncertain`, the reviewer's loop stops "waiting for a
person", and the review handler fails the saga: `failed` at preparation, with
nothing left for a person to reconcile. (The chaos run met it after a SIGKILL
of the reviewer worker.)

Here the death is a `BaseException` raised inside the executor on the first
call, which escapes the engine just as a SIGKILL would: the intent is
committed, no result is recorded. Everything else is the real in-process
pipeline on SQLite with the inline broker. Run:

    .venv/bin/python -m chaos.repro_review_crash

It prints the saga's state and reason, and exits 1 when the saga failed this
way (the bug), 0 when the re-run review went on.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import services
from orchestrator.bootstrap import build_app
from orchestrator.config import Settings

CORPUS = Path(__file__).resolve().parent.parent / "roles" / "sample_corpus"


class WorkerDied(BaseException):
    """Stands for the SIGKILL: nothing after it runs in the dying process."""


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="pressroom-repro-"))
    settings = Settings(
        database_url=f"sqlite:///{tmp / 'pressroom.db'}",
        broker_url="inline://",
        secret="repro",
        secret_file=tmp / "secret",
        index_dir=tmp / "index",
        destination_timeout=0.5,
        lease_seconds=1.0,
    )
    app = build_app(settings, memory_destinations=True)
    spec = app.registry.get("review.record")
    assert spec is not None and spec.executor is not None
    real = spec.executor
    died: list[bool] = []

    def dies_once(ctx: Any, args: Any) -> Any:
        if not died:
            died.append(True)
            raise WorkerDied()
        return real(ctx, args)

    app.registry._specs["review.record"] = dataclasses.replace(spec, executor=dies_once)
    try:
        services.submit(
            app,
            brief="history of the library network",
            corpus=str(CORPUS),
            destinations=[f"site:{tmp / 'site'}"],
            actor="dana",
        )
    except WorkerDied:
        pass
    sid = services.status(app)["sagas"][0]["saga_id"]
    print(f"after the reviewer died: {services.status(app, sid)['state']}")
    time.sleep(settings.destination_timeout + 5 + 1)  # the intent's claim and the work's lease run out
    app.drain()  # the relay's sweeper sends the review again; a reviewer takes it
    status = services.status(app, sid)
    print(f"after the lease brought the review back: {status['state']}: {status.get('reason')}")
    bug = status["state"] == "failed" and "uncertain" in str(status.get("reason"))
    return 1 if bug else 0


if __name__ == "__main__":
    sys.exit(main())

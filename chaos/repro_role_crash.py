"""Reproductions of two chaos findings: a role worker that dies inside a keyed tool call fails its saga.

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

    .venv/bin/python -m chaos.repro_role_crash               # review.record
    .venv/bin/python -m chaos.repro_role_crash draft.write   # the writer's keyed tool

    .venv/bin/python -m chaos.repro_role_crash draft.write --during-claim

The last is the second finding: the lease runs out while the dead call's claim
on its key still holds (possible whenever `PRESSROOM_LEASE_SECONDS` is less
than `PRESSROOM_DESTINATION_TIMEOUT` + 5), the re-run's `draft.write` is
`rejected` ("another call holds key … in flight"), the writer's planner
finishes without a draft, and the saga fails "writing stopped: no draft".

It prints the saga's state and reason, and exits 1 when the saga failed (the
bug), 0 when the re-run went on. Both findings are fixed; the reproductions
stay as tests (`tests/integration/test_role_crash.py`).
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings

CORPUS = Path(__file__).resolve().parent.parent / "roles" / "sample_corpus"


class WorkerDied(BaseException):
    """Stands for the SIGKILL: nothing after it runs in the dying process."""


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    during_claim = "--during-claim" in args
    names = [a for a in args if not a.startswith("--")]
    tool = names[0] if names else "review.record"  # or draft.write: the writer's keyed tool, the same path
    # After the claim: the re-run asks the (missing) status probe. During it: the lease (1 s)
    # runs out before the intent's claim (destination timeout + 5 s) does.
    timeout = 10.0 if during_claim else 0.5
    tmp = Path(tempfile.mkdtemp(prefix="pressroom-repro-"))
    settings = Settings(
        database_url=f"sqlite:///{tmp / 'pressroom.db'}",
        broker_url="inline://",
        secret="repro",
        secret_file=tmp / "secret",
        index_dir=tmp / "index",
        destination_timeout=timeout,
        lease_seconds=1.0,
    )
    app = build_app(settings, memory_destinations=True)
    spec = app.registry.get(tool)
    assert spec is not None and spec.executor is not None
    real = spec.executor
    died: list[bool] = []

    def dies_once(ctx: Any, args: Any) -> Any:
        if not died:
            died.append(True)
            raise WorkerDied()
        return real(ctx, args)

    app.registry._specs[tool] = dataclasses.replace(spec, executor=dies_once)
    try:
        app.submissions.submit(
            brief="history of the library network",
            corpus=str(CORPUS),
            destinations=[f"site:{tmp / 'site'}"],
            actor="dana",
        )
    except WorkerDied:
        pass
    sid = app.reads.status()["sagas"][0]["saga_id"]
    print(f"after the worker died in {tool}: {app.reads.status(sid)['state']}")
    # the work's lease runs out; and, unless --during-claim, the intent's claim too
    time.sleep(2.0 if during_claim else settings.destination_timeout + 5 + 1)
    app.consumer.drain()  # the relay's sweeper sends the review again; a reviewer takes it
    status = app.reads.status(sid)
    print(f"after the lease brought the work back: {status['state']}: {status.get('reason')}")
    return 1 if status["state"] == "failed" else 0


if __name__ == "__main__":
    sys.exit(main())

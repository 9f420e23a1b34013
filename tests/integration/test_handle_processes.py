"""Capability handles across real processes: a relay and role and publisher workers on
PostgreSQL and Redis, with handoffs whose handles were tampered with on their way.

One topology runs every case: sagas submitted while no relay runs have their first
handoff rewritten in the outbox (forged, widened, expired, beyond its delegation depth,
stripped from the message though its work row records it, another saga's, another corpus);
approvals made while the relay is stopped again have the publisher's handle rewritten (a
count below the destinations, a destination left out, stripped). Each is refused by the
worker that receives it, with its event, and its saga fails the way a policy refusal fails
it; the stripped saga is retried to review. Work queued by a release before handles (no
handle in its message nor in its work row) goes on under the handle its grant mints.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from orchestrator.core.routing import PUBLISH, RESEARCH
from orchestrator.harness.handles import Handle, encode, verify
from orchestrator.pressroom import Pressroom
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import WorkRow
from tests.conftest import base_env
from tests.integration.helpers import make_app
from tests.support.processes import Processes, saga_state, wait_until

KEY = base_env()["PRESSROOM_SECRET"].encode()


def rewrite(
    app: Pressroom, sid: str, task: str, change: Callable[[dict[str, Any]], None], *, work_too: bool = True
) -> None:
    """Change the unsent handoff of `task` for `sid` in the outbox (and its work row, unless
    only the message is changed on its way)."""
    with Session(app.engine) as s:
        row = s.exec(select(OutboxRow).where(OutboxRow.saga_id == sid, OutboxRow.task == task)).one()
        payload = dict(row.payload)
        change(payload)
        row.payload = payload
        work = s.get(WorkRow, payload["work_id"])
        assert work is not None
        if work_too:
            work.payload = payload
        s.add(row)
        s.add(work)
        s.commit()


def resign(key: bytes = KEY, **update: Any) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        handle: Handle = verify(payload["handle"], KEY)
        assert handle.id == payload["work_id"] and handle.parent is None  # a root, named for its work
        payload["handle"] = encode(handle.model_copy(update=update), key)

    return change


def drop_handle(payload: dict[str, Any]) -> None:
    del payload["handle"]  # as a release before handles queues it (or an attacker strips it)


def events(app: Pressroom, sid: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in app.reads.history(sid)["events"] if e["kind"] == kind]


def test_tampered_handles_are_refused_across_processes(
    tmp_path: Path, pg_url: str, redis_url: str, corpus: Path
) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS="5",
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.2",
    )
    app = make_app(pg_url, tmp_path, broker_url="none://", secret=KEY.decode())
    procs = Processes(env, tmp_path)
    try:
        procs.worker("roles", "researcher,writer,reviewer")
        procs.worker("publisher", "publisher")

        def submit(*dests: str) -> str:
            got = app.submissions.submit(
                brief="history of the library network",
                corpus=str(corpus),
                destinations=list(dests),
                actor="dana",
            )
            return str(got["saga_id"])

        one = f"site:{tmp_path / 'one'}"
        two = f"site:{tmp_path / 'two'}"
        cases = {
            "forged": resign(key=b"not the server's key"),
            "widened": resign(actions=("corpus.read", "corpus.search", "evidence.record", "publish")),
            "expired": resign(expires_at=app.clock.now() - timedelta(seconds=1)),
            "depth": resign(id="grandchild", parent="child", depth=-1),
            "missing": drop_handle,
            "corpus": resign(corpus="/another/corpus"),
        }
        sagas = {}
        for name, change in cases.items():
            sagas[name] = submit(one)
            # "missing": only the message loses its handle; its work row still records it.
            rewrite(app, sagas[name], RESEARCH, change, work_too=name != "missing")
        earlier = submit(one)  # queued by a release before handles: neither records one
        rewrite(app, earlier, RESEARCH, drop_handle)
        counted, outside, unhandled = submit(one, two), submit(one, two), submit(one)
        # A valid handle replayed outside its saga: another saga's researcher handle.
        sagas["replayed"] = submit(one)
        rewrite(app, sagas["replayed"], RESEARCH, lambda p: p.update(handle=_handle(app, counted, RESEARCH)))

        relay = procs.relay()
        for sid in sagas.values():
            wait_until(lambda sid=sid: saga_state(env, sid) == "failed", timeout=60, what=f"{sid} failed")
        for sid in (counted, outside, unhandled, earlier):
            wait_until(lambda sid=sid: saga_state(env, sid) == "ready-for-review", timeout=90, what="review")
        problems = {
            name: [(e["actor"], e["status"], e["detail"]["problem"]) for e in events(app, sid, "capability")]
            for name, sid in sagas.items()
        }
        assert problems == {
            "forged": [("researcher", "refused", "forged")],
            "widened": [("researcher", "refused", "widened")],
            "expired": [("researcher", "refused", "expired")],
            "depth": [("researcher", "refused", "depth")],
            "missing": [("researcher", "refused", "missing")],
            "replayed": [("researcher", "refused", "other_saga")],
            "corpus": [("researcher", "refused", "resource")],
        }
        for sid in sagas.values():
            status = app.reads.status(sid)
            assert status["reason"].startswith("refused handoff: ") and status["version"] == 0
            assert events(app, sid, "tool_call") == [], "nothing ran under a refused handle"

        # The publisher: approvals made while no relay runs, their handles rewritten.
        relay.stop()
        for sid in (counted, outside, unhandled, earlier):
            app.reviews.approve(sid, version=1, actor="erin")
        rewrite(app, counted, PUBLISH, resign(counts={"publish": 1, "publish.compensate": 2}))
        rewrite(app, outside, PUBLISH, resign(destinations=(one,)))
        rewrite(app, unhandled, PUBLISH, drop_handle, work_too=False)
        rewrite(app, earlier, PUBLISH, drop_handle)
        procs.relay("relay-2")
        for sid in (counted, outside, unhandled):
            wait_until(lambda sid=sid: saga_state(env, sid) == "failed", timeout=60, what=f"{sid} failed")
        wait_until(lambda: saga_state(env, earlier) == "succeeded", timeout=60, what="earlier work published")
        minted = [(e["actor"], e["status"], e["detail"]["why"]) for e in events(app, earlier, "capability")]
        why = "queued by a release before capability handles"
        assert minted == [("researcher", "minted", why), ("publisher", "minted", why)]
        assert "no capability handle" in app.reads.status(unhandled)["reason"]

        def refusals(sid: str) -> list[str]:
            calls = events(app, sid, "tool_call")
            return [
                e["detail"]["reason"] for e in calls if e["tool"] == "publish" and e["status"] == "rejected"
            ]

        assert [r for r in refusals(counted) if "uses left" in r], refusals(counted)
        assert (
            sum(e["status"] == "ok" for e in events(app, counted, "tool_call") if e["tool"] == "publish") == 1
        )
        assert refusals(outside) == [
            f"capability handle {_handle_id(app, outside)} does not cover destination {two}"
        ]
        assert "does not cover destination" in app.reads.status(outside)["reason"]

        # The saga refused for want of a handle is not lost: a retry prepares it under handles.
        app.reviews.retry(sagas["missing"], actor="olga")
        wait_until(
            lambda: saga_state(env, sagas["missing"]) == "ready-for-review", timeout=90, what="retried"
        )
    except AssertionError:
        print(procs.logs())
        raise
    finally:
        procs.stop_all()
        app.engine.dispose()


def _handle(app: Pressroom, sid: str, task: str) -> str:
    with Session(app.engine) as s:
        row = s.exec(select(OutboxRow).where(OutboxRow.saga_id == sid, OutboxRow.task == task)).first()
        assert row is not None
        return str(row.payload["handle"])


def _handle_id(app: Pressroom, sid: str) -> str:
    return verify(_handle(app, sid, PUBLISH), KEY).id

"""`audit verify`: does a saga's stored record explain itself?

Three checks, read in one snapshot:

1. the event chain — each of the saga's events, in `seq` order, links to the
   one before it and hashes to its stored hash (`harness.event_chain`): keyed
   under the chain key this process holds for the database, plain SHA-256 for
   events up to the signed cutover (`store.chain_keys`); each event over the
   fields its schema version hashes (version 2's include the version itself);
2. the state — `sagas.reducer.reduce(events)` equals the stored saga row and
   its steps (state, head version, each step's state and key);
3. the checkpoint chain — `harness.checkpoints.verify_chain`, and every
   checkpoint names an intent event of the saga.

`verify(engine, saga_id, against=…)` returns the report; `problems` lists every
mismatch found, the first one first; `events.schema_versions` counts the
saga's events by the schema version they were written with. Reads only. With a checkpoint
(`audit_checkpoint.export`), it also checks that the saga's first events are
still those the checkpoint saw (`audit_checkpoint.compare`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from orchestrator.audit_checkpoint import Checkpoint, compare, snapshot
from orchestrator.core.errors import NotFound
from orchestrator.harness.checkpoints import AgentState, verify_chain
from orchestrator.harness.event_chain import CHAIN_FIELDS, first_broken
from orchestrator.store.chain_keys import key_of, plain_upto
from orchestrator.store.tables import CheckpointRow, EventRow, SagaRow, StepRow
from sagas import records
from sagas.reducer import EventLogMismatch, LoggedEvent, SagaView, differences, reduce, stored_view


def verify(
    engine: Engine, saga_id: str, *, against: Checkpoint | None = None, key: bytes | None = None
) -> dict[str, Any]:
    """The audit report of one saga (by id or unique prefix); `NotFound` when there is none,
    unless `against` lists it: then it was removed, and that is the report's problem. `key`:
    the chain key (default: the one this process holds for the database)."""
    key = key or key_of(engine)
    with Session(snapshot(engine)) as s:
        try:
            saga = records.find_saga(s, saga_id)
        except NotFound:
            if against is None or saga_id not in against.sagas:
                raise
            return _gone(saga_id, against)
        upto, cutover_problem = plain_upto(s.connection(), key)
        events = list(s.exec(select(EventRow).where(EventRow.saga_id == saga.id).order_by(col(EventRow.seq))))
        checkpoints = list(
            s.exec(
                select(CheckpointRow).where(CheckpointRow.saga_id == saga.id).order_by(col(CheckpointRow.seq))
            )
        )
        steps = list(
            s.exec(select(StepRow).where(StepRow.saga_id == saga.id).order_by(col(StepRow.position)))
        )
        report = _report(saga, events, checkpoints, steps, key, upto, cutover_problem)
    if against is not None:
        found = compare(against, saga.id, [(e.seq or 0, e.hash) for e in events])
        report["checkpoint_file"] = found
        if found["problem"]:
            report["problems"].append(found["problem"])
            report["ok"] = False
    return report


def _gone(saga_id: str, against: Checkpoint) -> dict[str, Any]:
    listed = against.sagas[saga_id]
    problem = (
        f"checkpoint: saga {saga_id} had {listed['count']} events at the checkpoint "
        f"({against.created_at}) and is gone from the database"
    )
    return {
        "saga_id": saga_id,
        "ok": False,
        "events": {"count": 0, "ok": False},
        "checkpoints": {"count": 0, "ok": False},
        "state": {"ok": False, "stored": None, "derived": None},
        "checkpoint_file": {"listed": True, "count": listed["count"], "problem": problem},
        "problems": [problem],
    }


def _report(
    saga: SagaRow,
    events: list[EventRow],
    checkpoints: list[CheckpointRow],
    steps: list[StepRow],
    key: bytes,
    upto: int,
    cutover_problem: str | None,
) -> dict[str, Any]:
    event_problems = _event_chain(events, key, upto)
    if event_problems and cutover_problem:
        event_problems.append(cutover_problem)
    checkpoint_problems = _checkpoint_chain(checkpoints, events)
    state, state_problems = _state(saga, events, steps)
    problems = event_problems + state_problems + checkpoint_problems
    plain = sum(1 for e in events if (e.seq or 0) <= upto)
    return {
        "saga_id": saga.id,
        "ok": not problems,
        "events": {
            "count": len(events),
            "ok": not event_problems,
            "plain": plain,
            "schema_versions": dict(sorted(Counter(str(e.schema_version) for e in events).items())),
        },
        "checkpoints": {"count": len(checkpoints), "ok": not checkpoint_problems},
        "state": {"ok": not state_problems, **state},
        "problems": problems,
    }


def _event_chain(events: list[EventRow], key: bytes, upto: int) -> list[str]:
    """The first broken link: events up to the cutover are plain (they come first, by seq)."""
    links = [(e.prev_hash, e.hash, {name: getattr(e, name) for name in CHAIN_FIELDS}) for e in events]
    plain = sum(1 for e in events if (e.seq or 0) <= upto)
    broken = first_broken(links, key, plain)
    if broken is None:
        return []
    index, why = broken
    event = events[index]
    return [f"event chain: event {event.seq} ({event.kind} {event.status}): {why}"]


def _state(saga: SagaRow, events: list[EventRow], steps: list[StepRow]) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = {"stored": None, "derived": None}
    problems: list[str] = []
    stored: SagaView | None = None
    try:
        stored = stored_view(
            saga.state, saga.head_version, {st.uri: (st.state, st.idempotency_key) for st in steps}
        )
        out["stored"] = stored.model_dump(mode="json")
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        problems.append(f"stored {where} is not a state Pressroom has: {err['input']!r}")
    try:
        derived = reduce(
            LoggedEvent(
                seq=e.seq,
                kind=e.kind,
                status=e.status,
                detail=e.detail or {},
                schema_version=e.schema_version,
            )
            for e in events
        )
        out["derived"] = derived.model_dump(mode="json")
    except EventLogMismatch as exc:
        problems.append(f"the events do not reduce to a state: {exc}")
        return out, problems
    if stored is not None:
        problems += differences(stored, derived)
    return out, problems


def _checkpoint_chain(checkpoints: list[CheckpointRow], events: list[EventRow]) -> list[str]:
    links: list[tuple[str, str, AgentState]] = []
    for c in checkpoints:
        try:
            links.append((c.prev_hash, c.hash, AgentState.model_validate(c.state)))
        except ValidationError:
            return [f"checkpoint chain: checkpoint {c.seq}: its state is not an agent state"]
    broken = verify_chain(links)
    if broken is not None:
        return [f"checkpoint chain: checkpoint {checkpoints[broken].seq}: its hash or link does not match"]
    intents = {e.event_id for e in events if e.kind == "intent"}
    for c, (_, _, state) in zip(checkpoints, links, strict=True):
        if (c.event_id, c.step) != (state.event_id, state.step):
            return [f"checkpoint chain: checkpoint {c.seq}: its columns disagree with its hashed state"]
        if c.event_id not in intents:
            return [f"checkpoint chain: checkpoint {c.seq} names no intent event of the saga"]
    return []


__all__ = ["verify"]

"""Audit checkpoints: a signed note of every saga's chain head, to keep somewhere else.

`pressroom audit export` writes one (`export`): for each saga, how many events
it had and the link of the last one, with the total, the last event `seq` and
the time, signed with a key derived from the chain key
(`event_chain.checkpoint_mac`). `pressroom audit verify SAGA_ID --against FILE`
loads it (`load`: a file that does not parse is bad input, a signature that does
not match is refused) and `compare`s: the saga's first `count` events must still
be there and the last of them must still carry the link the checkpoint saw. With
the chain verified from its first event, that head pins every event before it,
plain or keyed, so nothing before the checkpoint changed, was removed or was
inserted. A saga the checkpoint does not list began after it: nothing to compare.

`compare` and `parse` are pure; `export` reads the database in one snapshot.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.engine import Engine

from orchestrator.core.errors import InvalidInput, Refused
from orchestrator.harness.event_chain import checkpoint_mac
from orchestrator.store.adapter import adapter_for
from orchestrator.store.chain_keys import key_of
from orchestrator.store.tables import EventRow

FORMAT = "pressroom-audit-checkpoint/1"
_EVENTS: Table = EventRow.__table__  # type: ignore[attr-defined]
_LAST = (
    select(_EVENTS.c.saga_id, func.count().label("events"), func.max(_EVENTS.c.seq).label("last_seq"))
    .where(_EVENTS.c.saga_id.is_not(None))
    .group_by(_EVENTS.c.saga_id)
    .subquery()
)
_HEADS = select(_LAST.c.saga_id, _LAST.c.events, _LAST.c.last_seq, _EVENTS.c.hash).join(
    _EVENTS, _EVENTS.c.seq == _LAST.c.last_seq
)
_TOTAL = select(func.count(), func.max(_EVENTS.c.seq))


@dataclass(frozen=True)
class Checkpoint:
    created_at: str
    events: int
    last_seq: int
    sagas: dict[str, dict[str, Any]]


def snapshot(engine: Engine) -> Engine:
    """`engine` reading in one snapshot (PostgreSQL's REPEATABLE READ; SQLite's BEGIN is one)."""
    return adapter_for(engine).snapshot_reads(engine)


def export(engine: Engine, now: datetime | None = None) -> dict[str, Any]:
    """The signed checkpoint of `engine`'s database, as the JSON object to write."""
    with snapshot(engine).connect() as conn:
        total, last = conn.execute(_TOTAL).one()
        sagas = {
            row.saga_id: {"count": int(row.events), "last_seq": int(row.last_seq), "head": row.hash}
            for row in conn.execute(_HEADS)
        }
    stamp = (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="seconds")
    body: dict[str, Any] = {
        "format": FORMAT,
        "created_at": stamp,
        "events": int(total or 0),
        "last_seq": int(last or 0),
        "sagas": dict(sorted(sagas.items())),
    }
    return {**body, "mac": checkpoint_mac(key_of(engine), body)}


def parse(text: str, key: bytes, where: str = "the checkpoint") -> Checkpoint:
    """A checkpoint from its JSON text, its signature checked under `key`."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{where} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("mac"), str):
        raise InvalidInput(f"{where} is not a Pressroom audit checkpoint ({FORMAT})")
    body = {k: v for k, v in data.items() if k != "mac"}
    if not hmac.compare_digest(data["mac"], checkpoint_mac(key, body)):
        raise Refused(f"{where} is not signed with this database's key: it proves nothing")
    sagas = data.get("sagas")
    valid = isinstance(sagas, dict) and all(
        isinstance(v, dict)
        and isinstance(v.get("count"), int)
        and isinstance(v.get("last_seq"), int)
        and isinstance(v.get("head"), str)
        for v in sagas.values()
    )
    if not valid or not isinstance(data.get("events"), int) or not isinstance(data.get("last_seq"), int):
        raise InvalidInput(f"{where}: its sagas, events or last_seq are malformed")
    assert isinstance(sagas, dict)  # checked above
    return Checkpoint(str(data.get("created_at")), data["events"], data["last_seq"], sagas)


def compare(checkpoint: Checkpoint, saga_id: str, events: list[tuple[int, str]]) -> dict[str, Any]:
    """Whether the saga's events, [(seq, hash)] in seq order, still begin with what the
    checkpoint saw: `listed`, `count`, and `problem` (None when nothing changed)."""
    listed = checkpoint.sagas.get(saga_id)
    if listed is None:
        return {"listed": False, "count": 0, "problem": None}
    count = listed["count"]
    problem = None
    if len(events) < count:
        problem = (
            f"checkpoint: saga {saga_id} had {count} events at the checkpoint ({checkpoint.created_at}), "
            f"it has {len(events)}: history before it was removed"
        )
    elif count and events[count - 1] != (listed["last_seq"], listed["head"]):
        seq = events[count - 1][0]
        problem = (
            f"checkpoint: saga {saga_id}: event {seq}, the last the checkpoint ({checkpoint.created_at}) "
            "saw, is not the one it saw: history before it was rewritten"
        )
    return {"listed": True, "count": count, "problem": problem}


__all__ = ["FORMAT", "Checkpoint", "compare", "export", "parse", "snapshot"]

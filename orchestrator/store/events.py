"""The one writer of the events table: every event is appended here, chained.

`add_event` (ORM), `insert_event` (one prebuilt Core INSERT, for the hot
paths: the harness's records) and `WithEvent` (an event carried by the
statement of the row it records, as a CTE on PostgreSQL: one round trip for
both) all take the saga's chain head through `_link`, which links the new
event onto it (`orchestrator.harness.event_chain`: HMAC-SHA256 under the chain
key this process holds for the database, `orchestrator.store.chain_keys`). `ChainedEvent` is for a
PostgreSQL statement that takes the chain itself (the consumer's `settle`,
with `message applied`): the server computes that link by the same rule (the
event's keyed tag is computed here and bound; the key stays in the process), and
the hash it returns is checked here before the transaction goes on. Every event
is written with the current schema version (`event_chain.EVENT_SCHEMA`), which
its link covers. The head is read once per
transaction under the saga row's lock (on PostgreSQL one call of
`pressroom_hold_chain`, migration 0006: the row `FOR UPDATE`, then the head
read with a snapshot taken after the lock; on SQLite every unit of work
already holds the write lock from `BEGIN IMMEDIATE`; `pressroom_hold_chains`,
migration 0007, also returns the checkpoints' head), so two transactions
writing one saga's events take turns and the chain never forks; `UNIQUE
(saga_id, prev_hash)` would refuse a fork if they did not. Later events of
the same transaction chain onto the head kept in the session. An event
without a saga is a chain of its own.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    CursorResult,
    Executable,
    LargeBinary,
    String,
    Table,
    bindparam,
    exists,
    func,
    insert,
    literal,
    select,
)
from sqlmodel import Session

from orchestrator.harness.digests import sha256_hex
from orchestrator.harness.event_chain import (
    EVENT_SCHEMA,
    GENESIS,
    canonical_event,
    event_tag,
    keyed_event_hash,
)
from orchestrator.harness.ports import EventTimes
from orchestrator.harness.principals import current_principal
from orchestrator.store.adapter import adapter_for
from orchestrator.store.chain_keys import key_of
from orchestrator.store.tables import EventRow, new_id, utcnow

_HEADS = "pressroom.event_heads"
_EVENTS: Table = EventRow.__table__  # type: ignore[attr-defined]
_INSERT_EVENT = insert(_EVENTS)
# The same INSERT with every column bound by name (`ev_<column>`), for `WithEvent` to carry.
_EVENT_COLUMNS = tuple(c for c in _EVENTS.c if c.name != "seq")
# The columns an event's fields fill (its link, `prev_hash` and `hash`, aside).
_FIELD_COLUMNS = tuple(c for c in _EVENT_COLUMNS if c.name not in ("prev_hash", "hash"))
_EVENT_CTE = (
    insert(_EVENTS)
    .values({c.name: bindparam(f"ev_{c.name}", type_=c.type) for c in _EVENT_COLUMNS})
    .cte("new_event")
)
# Prebuilt, run on the session's connection (no ORM execution path, no autoflush).
_CHAIN_HEAD = (
    select(_EVENTS.c.hash)
    .where(_EVENTS.c.saga_id == bindparam("saga_id"))
    .order_by(_EVENTS.c.seq.desc())
    .limit(1)
)


# PostgreSQL: both in one round trip (migration 0006: the lock, then the head read by a
# statement of its own inside the function, with a snapshot taken after the lock).
def chain_hold(bind: str = "saga_id") -> ColumnElement[str | None]:
    """The lock-and-head call (its saga bound as `bind`), for a statement that takes the chain
    along with its own work; the head it returns is handed to `chain_held`."""
    return func.pressroom_hold_chain(bindparam(bind, type_=String))


_HOLD_CHAIN = select(chain_hold())


def held_heads(session: Session, chain: str = "events") -> dict[str | None, str]:
    """This transaction's heads of one kind of chain (`events`, `checkpoints`), by saga,
    kept while it holds the sagas' locks (forgotten when the transaction ends)."""
    session.connection()  # begin, so the transaction below is this one
    txn = session.get_transaction()
    name = f"{_HEADS}.{chain}"
    kept = session.info.get(name)
    if kept is None or kept[0] is not txn:
        kept = (txn, {})
        session.info[name] = kept
    heads: dict[str | None, str] = kept[1]
    return heads


def _heads(session: Session) -> dict[str | None, str]:
    return held_heads(session, "events")


def hold_chain(session: Session, saga_id: str) -> str:
    """Lock the saga's chain for this transaction (the saga row, `FOR UPDATE`) and
    return its head. A transaction that takes other row locks before writing
    an event calls this first, so every writer locks the saga before the rest."""
    heads = _heads(session)
    head = heads.get(saga_id)
    if head is None:
        conn = session.connection()
        # Held to the end of the transaction: the head cannot move under us. The
        # head is read after the lock is granted, so it sees what the transaction
        # that held the lock committed.
        if adapter_for(conn).locks_rows:
            found = conn.execute(_HOLD_CHAIN, {"saga_id": saga_id}).scalar()
        else:  # SQLite: the unit of work's BEGIN IMMEDIATE holds the write lock already
            found = conn.execute(_CHAIN_HEAD, {"saga_id": saga_id}).scalar()
        head = heads[saga_id] = found or GENESIS
    return head


def chain_held(session: Session, saga_id: str, head: str | None) -> None:
    """Keep the head a statement with `chain_hold` returned: the chain is held (PostgreSQL).
    A head this transaction already keeps stays: its own events may not be flushed yet."""
    _heads(session).setdefault(saga_id, head or GENESIS)


def acting_fields() -> dict[str, str | None]:
    """`principal_id` and `auth_method` of the principal acting now (null: the system)."""
    principal = current_principal()
    if principal is None:
        return {"principal_id": None, "auth_method": None}
    return {"principal_id": principal.id, "auth_method": principal.auth}


def _key(session: Session) -> bytes:
    bind = session.get_bind()
    return key_of(bind.engine)


def _link(session: Session, values: dict[str, Any]) -> None:
    """Set `prev_hash` and `hash` on an event's values: the only place they are computed."""
    saga_id = values.get("saga_id")
    prev = GENESIS if saga_id is None else hold_chain(session, saga_id)
    values["prev_hash"] = prev
    values["hash"] = keyed_event_hash(_key(session), prev, values)
    if saga_id is not None:
        _heads(session)[saga_id] = values["hash"]


def _values(fields: dict[str, Any]) -> dict[str, Any]:
    """An event's column values, its chain link included."""
    times: EventTimes | None = fields.pop("times", None)
    values: dict[str, Any] = {**fields, **(times.model_dump() if times else {})}
    values["schema_version"] = EVENT_SCHEMA
    values.setdefault("event_id", new_id())
    values.setdefault("created_at", utcnow())
    for name, value in acting_fields().items():
        values.setdefault(name, value)
    if values.get("detail") is None:
        values["detail"] = {}
    return values


def add_event(session: Session, **fields: Any) -> EventRow:
    """Append one event to the session (it commits with the caller's unit of work)."""
    values = _values(fields)
    _link(session, values)
    row = EventRow(**values)
    session.add(row)
    return row


def insert_event(session: Session, **fields: Any) -> str:
    """`add_event` for a hot path: one prebuilt Core INSERT on the session's
    connection, at once; the event id. Takes the same fields (`times` too).
    Whatever the session holds is flushed first, so this event still follows
    the transaction's earlier events in `seq`; events added after it follow it."""
    session.flush()
    values = _values(fields)
    _link(session, values)
    session.connection().execute(_INSERT_EVENT, values)
    event_id: str = values["event_id"]
    return event_id


class WithEvent:
    """A prebuilt statement that writes an event along with it (`insert_event`'s fields):
    on PostgreSQL in one round trip, the event's INSERT a CTE of the statement; elsewhere
    the event, then the statement. Both commit, or neither, with the caller's transaction."""

    def __init__(self, statement: Executable) -> None:
        self.alone = statement
        self.joined = statement.add_cte(_EVENT_CTE)  # type: ignore[attr-defined]

    def execute(self, session: Session, params: dict[str, Any], **fields: Any) -> CursorResult[Any]:
        """Run the statement with `params`, and insert the event `fields` describe (give it
        its `event_id` when the statement needs it)."""
        session.flush()
        values = _values(fields)
        _link(session, values)
        conn = session.connection()
        if not adapter_for(conn).one_statement_writes:
            conn.execute(_INSERT_EVENT, values)
            return conn.execute(self.alone, params)
        event = {f"ev_{c.name}": values.get(c.name) for c in _EVENT_COLUMNS}
        return conn.execute(self.joined, {**params, **event})


class ChainedEvent:
    """An event a PostgreSQL statement writes while it takes the saga's chain itself.

    `WithEvent` needs the chain held first: its event's link is hashed here. This
    one is for a statement that holds the chain (`pressroom_hold_chain`) in the
    same round trip: the server links the event onto the head the lock gave, by
    `keyed_link`'s rule (sha256 over the previous hash's bytes, the event's
    canonical bytes and its keyed tag, both computed here and bound as
    `ev_canonical` and `ev_tag`). `ctes(when)` gives the two CTEs to add to the statement: the
    head, and the event's INSERT, which writes only where `when` holds; the
    statement selects `head_of` and `hash_of` and hands both to `written`. A row
    the statement changes besides waits for the lock through `after_head`.
    """

    def __init__(self, name: str = "new_event") -> None:
        self.head = select(func.coalesce(chain_hold("ev_saga_id"), literal(GENESIS)).label("prev")).cte(
            f"{name}_head"
        )
        self.name = name

    def ctes(self, when: ColumnElement[bool] | None = None) -> tuple[CTE, CTE]:
        prev = self.head.c.prev
        link = func.encode(
            func.sha256(
                func.convert_to(prev, "UTF8")
                .op("||")(bindparam("ev_canonical", type_=LargeBinary))
                .op("||")(bindparam("ev_tag", type_=LargeBinary))
            ),
            "hex",
        )
        rows = select(*(bindparam(f"ev_{c.name}", type_=c.type) for c in _FIELD_COLUMNS), prev, link)
        if when is not None:
            rows = rows.where(when)
        written = (
            insert(_EVENTS)
            .from_select([*(c.name for c in _FIELD_COLUMNS), "prev_hash", "hash"], rows)
            .returning(_EVENTS.c.hash)
            .cte(self.name)
        )
        return self.head, written

    def head_of(self) -> ColumnElement[str]:
        return select(self.head.c.prev).scalar_subquery()

    def after_head(self) -> ColumnElement[bool]:
        """A condition for another row's change in the statement: true, once the saga's lock is
        granted. An uncorrelated subquery, run once before that row is read, so the statement
        locks the saga before it, as `hold_chain` first would (the order every writer keeps)."""
        return exists(select(self.head.c.prev))

    def hash_of(self, written: CTE) -> ColumnElement[str | None]:
        return select(written.c.hash).scalar_subquery()

    @staticmethod
    def takes_chain(session: Session, saga_id: str | None) -> bool:
        """Whether a statement of this transaction should take `saga_id`'s chain itself: on
        PostgreSQL, for an event of a saga this transaction does not hold yet."""
        return (
            saga_id is not None
            and saga_id not in _heads(session)
            and adapter_for(session.connection()).one_statement_writes
        )

    @staticmethod
    def params(session: Session, **fields: Any) -> dict[str, Any]:
        """The statement's `ev_` parameters for the event `fields` describe (`insert_event`'s)."""
        session.flush()  # the head the server reads is the last event this transaction wrote
        values = _values(fields)
        if values.get("saga_id") is None:
            raise ValueError("a chained event belongs to a saga")
        canonical = canonical_event(values)
        return {
            **{f"ev_{c.name}": values.get(c.name) for c in _FIELD_COLUMNS},
            "ev_canonical": canonical,
            "ev_tag": event_tag(_key(session), canonical),
        }

    @staticmethod
    def written(session: Session, params: dict[str, Any], head: str, new_hash: str | None) -> None:
        """Keep the chain held after the statement ran: its head is the new event's hash when
        one was written, the head the lock gave otherwise. A link the server computed
        otherwise than `keyed_link` would raise here, before the transaction commits."""
        saga_id = params["ev_saga_id"]
        expected = sha256_hex(head.encode() + params["ev_canonical"] + params["ev_tag"])
        if new_hash is not None and new_hash != expected:
            raise RuntimeError(f"the server linked an event of saga {saga_id} unlike keyed_link")
        _heads(session)[saga_id] = new_hash or head


__all__ = [
    "ChainedEvent",
    "WithEvent",
    "add_event",
    "chain_held",
    "chain_hold",
    "held_heads",
    "hold_chain",
    "insert_event",
]

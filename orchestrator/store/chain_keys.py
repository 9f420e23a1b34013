"""The event chain's key in this process, and the signed cutover from plain to keyed links.

- **The key.** `use_chain_key(engine, signing_key)` (called by the composition
  root) derives the chain key from the signing key (`event_chain.chain_key`) and
  keeps it for the engine's database, by URL: every engine of this process on
  that database links and verifies with it. A database no application of this
  process configured (a test of the store alone) links with the key derived from
  an empty secret, which `audit verify` under the real key refuses.
- **The cutover.** `chain_marks` holds one row, `plain_upto`: migration 0009
  records there the last event `seq` written before links were keyed. Those
  events keep plain SHA-256 links; every later one must be keyed. The row is
  signed with the key (`event_chain.cutover_mac`) the first time an
  application starts on the upgraded database, so raising it later (to pass a
  rewritten event off as an old one) breaks its signature: `plain_upto` then
  counts as 0 and `audit verify` says why.
"""

from __future__ import annotations

import hmac
import threading
import weakref
from typing import Any

from sqlalchemy import Table, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel

from orchestrator.harness.event_chain import chain_key, cutover_mac

PLAIN_UPTO = "plain_upto"
UNCONFIGURED_KEY = chain_key(b"")


class ChainMarkRow(SQLModel, table=True):
    __tablename__ = "chain_marks"

    name: str = Field(primary_key=True)
    seq: int = Field(description="plain_upto: the last event seq whose link is plain SHA-256")
    mac: str | None = Field(default=None, description="cutover_mac under the chain key; null until signed")


_MARKS: Table = ChainMarkRow.__table__  # type: ignore[attr-defined]
_READ = select(_MARKS.c.seq, _MARKS.c.mac).where(_MARKS.c.name == PLAIN_UPTO)
_keys: dict[str, bytes] = {}
_by_pool: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def use_chain_key(engine: Engine, signing_key: bytes) -> bytes:
    """Link and verify events of `engine`'s database with the key derived from `signing_key`;
    sign the cutover if nobody has yet. The chain key."""
    key = chain_key(signing_key)
    with _lock:
        _keys[_url(engine)] = key
        _by_pool.clear()  # another engine of this database may have cached the key it had before
        _by_pool[engine.pool] = key
    with engine.begin() as conn:
        found = conn.execute(_READ).first()
        if found is not None and found.seq > 0 and found.mac is None:
            conn.execute(
                update(_MARKS)
                .where(_MARKS.c.name == PLAIN_UPTO, _MARKS.c.mac.is_(None))
                .values(mac=cutover_mac(key, found.seq))
            )
    return key


def key_of(engine: Engine) -> bytes:
    """The chain key for `engine`'s database in this process."""
    pool = engine.pool
    key = _by_pool.get(pool)
    if key is None:
        with _lock:
            key = _by_pool[pool] = _keys.get(_url(engine), UNCONFIGURED_KEY)
    return key


def plain_upto(conn: Connection, key: bytes) -> tuple[int, str | None]:
    """The last seq with a plain link, and a problem when the cutover's signature fails
    (then 0: every event must be keyed)."""
    found = conn.execute(_READ).first()
    if found is None or found.seq <= 0:
        return 0, None
    if found.mac is None or not hmac.compare_digest(found.mac, cutover_mac(key, found.seq)):
        return 0, (
            f"chain cutover: plain links up to event {found.seq} are not signed with this key; "
            "every event is checked as keyed"
        )
    return int(found.seq), None


__all__ = ["PLAIN_UPTO", "UNCONFIGURED_KEY", "ChainMarkRow", "key_of", "plain_upto", "use_chain_key"]

"""Capability handles: signed, expiring grants bound to one saga and one role. No I/O.

A handle names what its holder may do (`actions`: capability names such as
`corpus.search` or `publish`), on what (`corpus`, `destinations`, `tools`: the
`mcp:SERVER/TOOL` names its pipeline role declares), how often (`counts`:
uses allowed per action; an action without a count is bounded by the saga's
budget and step limits instead), until when (`expires_at`) and how many more
times it may be handed on (`depth`). It carries its own id and its parent's.

The coordinator mints a root handle for each handoff (`mint`: the role kind's
table ∩ the task); a holder hands on only a narrower one (`narrow`: child ⊆
parent ∩ task, depth − 1). The encoded form is the canonical body and an
HMAC-SHA256 over it with the server's key (the approval key, under its own
domain prefix, so an approval token never verifies as a handle): a database
or broker that can edit the body cannot recompute the signature. `verify`
compares in constant time and refuses versions it does not know; `admit`
checks the binding on arrival; `check` judges one tool call on the clock
passed in. Counting uses is the store's (`orchestrator.store.handle_uses`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from hashlib import sha256
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.harness.digests import canonical_json, sha256_hex

VERSION = 1
# Separates a handle's signature from every other HMAC made with the same key.
_DOMAIN = b"pressroom capability handle\n"
# How long a minted handle lasts: a role turn or a publishing run, with its redeliveries.
LIFETIME = timedelta(hours=24)
# How many times a role's handle may be handed on (a sub-agent, and no further).
ROOT_DEPTH = 1
# An encoded handle's bound: room for many destinations of URIs up to 2 KiB each.
MAX_TOKEN = 1 << 20


class Problem(StrEnum):
    """Why a handle does not authorize something: the typed half of `Fault`."""

    MISSING = "missing"
    MALFORMED = "malformed"
    VERSION = "version"
    FORGED = "forged"
    OTHER_SAGA = "other_saga"
    OTHER_ROLE = "other_role"
    EXPIRED = "expired"
    DEPTH = "depth"
    WIDENED = "widened"
    ACTION = "action"
    RESOURCE = "resource"
    COUNT = "count"


class Fault(NamedTuple):
    problem: Problem
    text: str


class HandleRefused(Exception):
    """A handle that does not verify, or a narrowing that would widen it."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.text)
        self.fault = fault

    def __reduce__(self) -> tuple[type[HandleRefused], tuple[Fault]]:
        return (HandleRefused, (self.fault,))


class Handle(BaseModel):
    """One capability handle, as signed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: int = VERSION
    id: str = Field(min_length=1, max_length=64)
    parent: str | None = Field(default=None, max_length=64)
    saga_id: str = Field(min_length=1, max_length=64)
    role: str = Field(min_length=1, max_length=40)
    actions: tuple[str, ...]
    corpus: str | None = None
    destinations: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    counts: dict[str, int] = Field(default_factory=dict)
    expires_at: datetime
    depth: int = Field(ge=0, le=8)

    def body(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))


@dataclass(frozen=True)
class Task:
    """What a saga's task allows a role: C_task. None for a resource: the task does not limit it."""

    actions: frozenset[str]
    corpus: str | None = None
    destinations: frozenset[str] = frozenset()
    tools: frozenset[str] = frozenset()
    counts: Mapping[str, int] = field(default_factory=dict)
    depth: int = ROOT_DEPTH


@dataclass(frozen=True)
class Grant:
    """What the coordinator asks a handoff's root handle to hold: its role, the role kind's
    table and the task. The dispatcher mints it, with the work's id as the handle's id."""

    role: str
    table: frozenset[str]
    task: Task

    def mint(self, *, handle_id: str, saga_id: str, now: datetime) -> Handle:
        return mint(
            handle_id=handle_id, saga_id=saga_id, role=self.role, table=self.table, task=self.task, now=now
        )


@dataclass(frozen=True)
class CallView:
    """What `check` judges of one tool call: its capability, its tool and what it touches."""

    action: str
    tool: str
    saga_id: str | None = None
    destination: str | None = None
    corpus: str | None = None


def mint(
    *, handle_id: str, saga_id: str, role: str, table: Iterable[str], task: Task, now: datetime
) -> Handle:
    """The root handle of a handoff: the role kind's `table` ∩ the task, for `LIFETIME`."""
    actions = frozenset(table) & task.actions
    return Handle(
        id=handle_id,
        saga_id=saga_id,
        role=role,
        actions=tuple(sorted(actions)),
        corpus=task.corpus,
        destinations=tuple(sorted(task.destinations)),
        tools=tuple(sorted(task.tools)),
        counts={a: n for a, n in sorted(task.counts.items()) if a in actions},
        expires_at=now + LIFETIME,
        depth=task.depth,
    )


def narrow(
    parent: Handle,
    *,
    child_id: str,
    role: str | None = None,
    actions: Iterable[str] | None = None,
    destinations: Iterable[str] | None = None,
    tools: Iterable[str] | None = None,
    counts: Mapping[str, int] | None = None,
    expires_at: datetime | None = None,
    task: Task | None = None,
) -> Handle:
    """A child of `parent` asking for at most what it names (None: the parent's), within `task`.

    Raises `HandleRefused` when the parent may not be handed on (depth 0) or the request
    is wider than the parent in any way: an action, a destination or a tool it lacks, a
    count above its count, an expiry after its expiry. The child is the request ∩ `task`.
    """
    if parent.depth <= 0:
        raise HandleRefused(Fault(Problem.DEPTH, f"handle {parent.id} may not be handed on (depth 0)"))
    want_actions = frozenset(parent.actions if actions is None else actions)
    want_dest = frozenset(parent.destinations if destinations is None else destinations)
    want_tools = frozenset(parent.tools if tools is None else tools)
    _within("actions", want_actions, frozenset(parent.actions))
    _within("destinations", want_dest, frozenset(parent.destinations))
    _within("tools", want_tools, frozenset(parent.tools))
    want_counts = dict(parent.counts)
    for action, n in (counts or {}).items():
        if n < 0 or (action in parent.counts and n > parent.counts[action]):
            raise HandleRefused(Fault(Problem.WIDENED, f"count for {action} above the parent's"))
        want_counts[action] = n
    until = parent.expires_at if expires_at is None else expires_at
    if until > parent.expires_at:
        raise HandleRefused(Fault(Problem.WIDENED, "expiry after the parent's"))
    if task is not None:
        want_actions &= task.actions
        want_dest &= task.destinations
        want_tools &= task.tools
        for action, n in task.counts.items():
            want_counts[action] = min(n, want_counts.get(action, n))
    return Handle(
        id=child_id,
        parent=parent.id,
        saga_id=parent.saga_id,
        role=role or parent.role,
        actions=tuple(sorted(want_actions)),
        corpus=parent.corpus,
        destinations=tuple(sorted(want_dest)),
        tools=tuple(sorted(want_tools)),
        counts={a: n for a, n in sorted(want_counts.items()) if a in want_actions},
        expires_at=until,
        depth=parent.depth - 1,
    )


def _within(what: str, asked: frozenset[str], held: frozenset[str]) -> None:
    extra = asked - held
    if extra:
        raise HandleRefused(Fault(Problem.WIDENED, f"{what} the parent lacks: {', '.join(sorted(extra))}"))


def _sign(body: bytes, key: bytes) -> str:
    return hmac.new(key, _DOMAIN + body, sha256).hexdigest()


def encode(handle: Handle, key: bytes) -> str:
    """`<base64url body>.<hex HMAC-SHA256>`: what a handoff carries."""
    body = handle.body()
    return f"{base64.urlsafe_b64encode(body).decode().rstrip('=')}.{_sign(body, key)}"


def verify(token: str | None, key: bytes) -> Handle:
    """The handle `token` encodes, when its signature is the server's; `HandleRefused` otherwise."""
    if not token:
        raise HandleRefused(Fault(Problem.MISSING, "the handoff carries no capability handle"))
    if len(token) > MAX_TOKEN or token.count(".") != 1:
        raise HandleRefused(Fault(Problem.MALFORMED, "capability handle is malformed"))
    encoded, signature = token.split(".")
    try:
        body = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise HandleRefused(Fault(Problem.MALFORMED, "capability handle is malformed")) from None
    if not hmac.compare_digest(_sign(body, key), signature):
        raise HandleRefused(Fault(Problem.FORGED, "capability handle signature does not verify"))
    try:
        raw = json.loads(body)
    except ValueError:
        raise HandleRefused(Fault(Problem.MALFORMED, "capability handle is malformed")) from None
    if not isinstance(raw, dict) or raw.get("v") != VERSION:
        version = raw.get("v") if isinstance(raw, dict) else None
        raise HandleRefused(Fault(Problem.VERSION, f"capability handle version {version!r} is not known"))
    depth = raw.get("depth")
    if isinstance(depth, int) and depth < 0:  # a grandchild beyond its root's delegation depth
        raise HandleRefused(Fault(Problem.DEPTH, "capability handle is beyond its delegation depth"))
    try:
        return Handle.model_validate(raw)
    except ValidationError:
        raise HandleRefused(Fault(Problem.MALFORMED, "capability handle is malformed")) from None


def admit(
    handle: Handle, *, saga_id: str, role: str, now: datetime, corpus: str | None = None
) -> Fault | None:
    """Why `handle` may not be used for `role`'s work on `saga_id` (reading `corpus`, when
    given: the saga's) at `now`, or None."""
    if handle.saga_id != saga_id:
        return Fault(Problem.OTHER_SAGA, f"capability handle {handle.id} belongs to another saga")
    if handle.role != role:
        return Fault(Problem.OTHER_ROLE, f"capability handle {handle.id} is for role {handle.role!r}")
    if handle.expires_at <= now:
        return Fault(Problem.EXPIRED, f"capability handle {handle.id} expired")
    if corpus is not None and handle.corpus != corpus:
        return Fault(Problem.RESOURCE, f"capability handle {handle.id} does not cover corpus {corpus}")
    return None


def check(handle: Handle, call: CallView, *, now: datetime, used: int = 0) -> Fault | None:
    """Why `handle` does not allow `call` at `now` after `used` earlier uses of its action, or None."""
    if handle.expires_at <= now:
        return Fault(Problem.EXPIRED, f"capability handle {handle.id} expired")
    if call.saga_id is not None and call.saga_id != handle.saga_id:
        return Fault(Problem.OTHER_SAGA, f"capability handle {handle.id} belongs to another saga")
    if call.action not in handle.actions:
        return Fault(Problem.ACTION, f"capability handle {handle.id} does not grant {call.action!r}")
    if call.tool.startswith("mcp:") and call.tool not in handle.tools:
        return Fault(Problem.RESOURCE, f"capability handle {handle.id} does not name tool {call.tool}")
    if call.destination is not None and call.destination not in handle.destinations:
        return Fault(
            Problem.RESOURCE, f"capability handle {handle.id} does not cover destination {call.destination}"
        )
    if call.corpus is not None and call.corpus != handle.corpus:
        return Fault(Problem.RESOURCE, f"capability handle {handle.id} does not cover corpus {call.corpus}")
    limit = handle.counts.get(call.action)
    if limit is not None and used >= limit:
        return Fault(Problem.COUNT, f"capability handle {handle.id} has no {call.action!r} uses left")
    return None


@dataclass(frozen=True)
class HandleUse:
    """One counted use of a handle's action, for the store to spend in the call's intent."""

    handle_id: str
    saga_id: str
    action: str
    key: str  # `use_key`: the same call again is the same use
    limit: int

    def refusal(self) -> str:
        return f"capability handle {self.handle_id} has no {self.action!r} uses left ({self.limit} allowed)"


def counted_use(handle: Handle, *, action: str, tool: str, args_digest: str) -> HandleUse | None:
    """The use a call of `action` spends of `handle`, or None when the action is not counted."""
    limit = handle.counts.get(action)
    if limit is None:
        return None
    return HandleUse(handle.id, handle.saga_id, action, use_key(tool, args_digest), limit)


def use_key(tool: str, args_digest: str) -> str:
    """What makes two calls the same call for counting: a replay of it is not a second use."""
    return sha256_hex(f"{tool}\n{args_digest}".encode())


__all__ = [
    "LIFETIME",
    "MAX_TOKEN",
    "ROOT_DEPTH",
    "VERSION",
    "CallView",
    "Fault",
    "Grant",
    "Handle",
    "HandleRefused",
    "HandleUse",
    "Problem",
    "Task",
    "admit",
    "check",
    "counted_use",
    "encode",
    "mint",
    "narrow",
    "use_key",
    "verify",
]

"""The chaos checker: pure logic over records the run collected. No I/O.

Inputs are what the suite saw: the submissions it made, the database's sagas,
steps, approvals and ledger keys (before and after reconciliation and the
operator's retries), and each destination's own record of its effects
(`apply` and `undo` per key, in the destination's order: the webhooks'
journals, the site folder's receipts, the git repository's history) with
what is live at the end. Findings, for every destination alike:

- lost: a submission that has no saga in the database;
- stuck: a saga neither terminal nor `effect-unknown` when the run settled;
- duplicate: a key applied again while its earlier apply is live (no undo
  between: an apply, undo, apply of one key is a retry, not a duplicate), or
  one saga with more than one live effect at the same destination;
- unauthorized: an applied effect whose (saga, version digest, destination)
  no consumed approval covers;
- orphan: a live effect of a saga that ended `failed` or `cancelled`
  (its compensation did not undo it); missing: a `succeeded` saga whose
  destination holds no live effect under the step's key;
- inconsistent: a destination whose record, replayed, does not give what it
  holds at the end (the record missed an effect);
- unresolved: a saga still not terminal after `effect-unknown` sagas were
  reconciled from the destinations' records and `failed` ones retried.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
SETTLED = TERMINAL | {"effect-unknown"}


@dataclass(frozen=True)
class Submission:
    request_id: str
    saga_id: str | None
    attempts: int = 1


@dataclass(frozen=True)
class Step:
    uri: str
    state: str
    key: str | None
    digest: str | None


@dataclass(frozen=True)
class Saga:
    saga_id: str
    state: str
    reason: str | None = None
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class Approval:
    saga_id: str
    version_digest: str
    destinations: tuple[str, ...]
    consumed: bool


@dataclass(frozen=True)
class Effect:
    """One journal entry of a destination: `apply` or `undo` of a key."""

    uri: str
    kind: str
    key: str
    saga_id: str | None = None
    digest: str | None = None


@dataclass(frozen=True)
class Records:
    submissions: tuple[Submission, ...]
    settled: tuple[Saga, ...]  # the database when the run settled, before reconciliation
    final: tuple[Saga, ...]  # the database at the end
    approvals: tuple[Approval, ...]
    ledger: dict[str, str | None]  # key -> saga id
    effects: tuple[Effect, ...]
    live: dict[tuple[str, str], str | None]  # (uri, key) -> digest, live at the end
    reconciled: tuple[tuple[str, str, str], ...] = ()  # (saga id, uri, outcome)
    undo_retried: tuple[str, ...] = ()  # effect-unknown sagas whose failed undo the operator ran again
    retried: tuple[str, ...] = ()  # failed sagas the operator retried


@dataclass
class Findings:
    sagas: int = 0
    submitted: int = 0
    states_settled: dict[str, int] = field(default_factory=dict)
    states_final: dict[str, int] = field(default_factory=dict)
    effects_applied: int = 0
    effects_undone: int = 0
    lost: list[str] = field(default_factory=list)
    stuck: list[dict[str, Any]] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    unauthorized: list[dict[str, Any]] = field(default_factory=list)
    orphans: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    effect_unknown: int = 0
    reconciled: dict[str, int] = field(default_factory=dict)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    inconsistent: list[dict[str, Any]] = field(default_factory=list)
    undo_retried: int = 0
    retried: int = 0
    succeeded_after_retry: int = 0
    per_destination: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.stuck
            or self.duplicates
            or self.unauthorized
            or self.orphans
            or self.missing
            or self.unresolved
            or self.inconsistent
        )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def check(records: Records) -> Findings:
    f = Findings(submitted=len(records.submissions), sagas=len(records.final))
    final = {s.saga_id: s for s in records.final}
    f.states_settled = dict(Counter(s.state for s in records.settled))
    f.states_final = dict(Counter(s.state for s in records.final))
    f.lost = sorted(
        sub.request_id for sub in records.submissions if sub.saga_id is None or sub.saga_id not in final
    )
    f.stuck = [
        {"saga_id": s.saga_id, "state": s.state, "reason": s.reason}
        for s in records.settled
        if s.state not in SETTLED
    ]
    f.effect_unknown = sum(1 for s in records.settled if s.state == "effect-unknown")
    f.reconciled = dict(Counter(outcome for _, _, outcome in records.reconciled))
    f.undo_retried = len(set(records.undo_retried))
    f.retried = len(set(records.retried))
    f.succeeded_after_retry = sum(
        1 for sid in set(records.retried) if sid in final and final[sid].state == "succeeded"
    )
    touched = (
        {sid for sid, _, _ in records.reconciled}
        | {s.saga_id for s in records.settled if s.state == "effect-unknown"}
        | set(records.undo_retried)
        | set(records.retried)
    )
    f.unresolved = [
        {"saga_id": sid, "state": final[sid].state if sid in final else None}
        for sid in sorted(touched)
        if sid not in final or final[sid].state not in TERMINAL
    ]
    f.effects_applied = sum(1 for e in records.effects if e.kind == "apply")
    f.effects_undone = sum(1 for e in records.effects if e.kind == "undo")
    f.duplicates = _duplicates(records)
    f.unauthorized = _unauthorized(records)
    f.orphans, f.missing = _end_state(records, final)
    f.inconsistent = _inconsistent(records)
    f.per_destination = _per_destination(records)
    return f


def _saga_of(records: Records, effect: Effect) -> str | None:
    return effect.saga_id or records.ledger.get(effect.key)


def replay(effects: tuple[Effect, ...]) -> tuple[set[tuple[str, str]], Counter[tuple[str, str]]]:
    """Each destination's record in its order: (what is live after it, applies over a live key)."""
    live: set[tuple[str, str]] = set()
    again: Counter[tuple[str, str]] = Counter()
    for e in effects:
        if e.kind == "apply":
            if (e.uri, e.key) in live:
                again[(e.uri, e.key)] += 1
            live.add((e.uri, e.key))
        elif e.kind == "undo":
            live.discard((e.uri, e.key))
    return live, again


def _duplicates(records: Records) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    _, again = replay(records.effects)
    for (uri, key), n in sorted(again.items()):
        out.append({"uri": uri, "key": key, "applies": n + 1, "why": "key applied again while live"})
    live_per_saga: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for uri, key in sorted(records.live):
        saga = records.ledger.get(key)
        live_per_saga[(uri, saga)].append(key)
    for (uri, saga), keys in sorted(live_per_saga.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if saga is not None and len(keys) > 1:
            out.append({"uri": uri, "saga_id": saga, "keys": keys, "why": "one saga, several live effects"})
    return out


def _unauthorized(records: Records) -> list[dict[str, Any]]:
    covered = {
        (a.saga_id, a.version_digest, uri) for a in records.approvals if a.consumed for uri in a.destinations
    }
    out: list[dict[str, Any]] = []
    for e in records.effects:
        if e.kind != "apply":
            continue
        saga = _saga_of(records, e)
        if saga is None or (saga, e.digest, e.uri) not in covered:
            out.append(
                {
                    "uri": e.uri,
                    "key": e.key,
                    "saga_id": saga,
                    "digest": e.digest,
                    "why": "no consumed approval covers this saga, digest and destination",
                }
            )
    return out


def _end_state(records: Records, final: dict[str, Saga]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    orphans: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for uri, key in sorted(records.live):
        saga = final.get(records.ledger.get(key) or "")
        if saga is not None and saga.state in ("failed", "cancelled"):
            orphans.append({"uri": uri, "key": key, "saga_id": saga.saga_id, "state": saga.state})
    for saga in records.final:
        if saga.state != "succeeded":
            continue
        for step in saga.steps:
            if step.key is None or (step.uri, step.key) not in records.live:
                missing.append(
                    {"saga_id": saga.saga_id, "uri": step.uri, "key": step.key, "step_state": step.state}
                )
    return orphans, missing


def _inconsistent(records: Records) -> list[dict[str, Any]]:
    replayed, _ = replay(records.effects)
    held = set(records.live)
    return [
        {"uri": uri, "key": key, "why": why}
        for why, keys in (
            ("live at the end, but the record never applied it (or undid it)", held - replayed),
            ("the record leaves it live, but the destination does not hold it", replayed - held),
        )
        for uri, key in sorted(keys)
    ]


def _per_destination(records: Records) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"applied": 0, "undone": 0, "live": 0})
    for e in records.effects:
        if e.kind in ("apply", "undo"):
            out[e.uri]["applied" if e.kind == "apply" else "undone"] += 1
    for uri, _ in records.live:
        out[uri]["live"] += 1
    return {uri: dict(counts) for uri, counts in sorted(out.items())}


__all__ = [
    "SETTLED",
    "TERMINAL",
    "Approval",
    "Effect",
    "Findings",
    "Records",
    "Saga",
    "Step",
    "Submission",
    "check",
    "replay",
]

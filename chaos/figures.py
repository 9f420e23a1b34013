"""Figures per fault kind: which sagas ran under each kind and how they fared. Pure: no I/O.

A saga ran under a fault when its submit→settled window (from its first
submit attempt to its first terminal or `effect-unknown` state) overlaps the
fault's window, from its start to its end plus a recovery margin (a restarted
process takes seconds to serve again; `RECOVERY_MARGIN`). A saga may run
under several kinds and counts in each; the "no fault" row holds the sagas
that ran under none, as the baseline. A lost submission (no saga) has the
window of its submit attempts. Per row: faults of the kind injected, sagas,
lost, duplicated, unauthorized, effect-unknown and how a person settled
those (steps confirmed / absent, undos run again), and the p50 and p99
submit→settled seconds (nearest rank).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

RECOVERY_MARGIN = 10.0
NO_FAULT = "no fault"


@dataclass(frozen=True)
class FaultWindow:
    kind: str
    start: float
    end: float


@dataclass(frozen=True)
class SagaRun:
    request_id: str
    saga_id: str | None  # None: lost
    submitted: float
    settled: float  # the first terminal or effect-unknown state; the run's end if never
    effect_unknown: bool = False
    duplicated: bool = False
    unauthorized: bool = False
    settlements: tuple[str, ...] = ()  # confirmed / absent / undo-retried, one per step a person settled


@dataclass(frozen=True)
class Row:
    kind: str
    faults: int
    sagas: int
    lost: int
    duplicated: int
    unauthorized: int
    effect_unknown: int
    confirmed: int
    absent: int
    undo_retried: int
    p50: float | None
    p99: float | None


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def windows(fault_log: Iterable[Mapping[str, Any]]) -> list[FaultWindow]:
    """The injected faults of a nemesis log (skipped and failed ones left out)."""
    return [
        FaultWindow(str(f["kind"]), float(f["started"]), float(f["ended"]))
        for f in fault_log
        if not f.get("skipped") and not f.get("error")
    ]


def under(run: SagaRun, fault: FaultWindow, margin: float) -> bool:
    return run.submitted <= fault.end + margin and fault.start <= run.settled


def _row(kind: str, faults: int, runs: list[SagaRun]) -> Row:
    done = [r for r in runs if r.saga_id is not None]
    settled = [s for r in runs for s in r.settlements]
    latency = [r.settled - r.submitted for r in done]
    p50, p99 = percentile(latency, 50), percentile(latency, 99)
    return Row(
        kind=kind,
        faults=faults,
        sagas=len(done),
        lost=len(runs) - len(done),
        duplicated=sum(r.duplicated for r in done),
        unauthorized=sum(r.unauthorized for r in done),
        effect_unknown=sum(r.effect_unknown for r in done),
        confirmed=settled.count("confirmed"),
        absent=settled.count("absent"),
        undo_retried=settled.count("undo-retried"),
        p50=None if p50 is None else round(p50, 1),
        p99=None if p99 is None else round(p99, 1),
    )


def figures(faults: list[FaultWindow], runs: list[SagaRun], margin: float = RECOVERY_MARGIN) -> list[Row]:
    """One row per fault kind that was injected (by name), then the "no fault" row."""
    rows = []
    for kind in sorted({f.kind for f in faults}):
        of_kind = [f for f in faults if f.kind == kind]
        rows.append(_row(kind, len(of_kind), [r for r in runs if any(under(r, f, margin) for f in of_kind)]))
    calm = [r for r in runs if not any(under(r, f, margin) for f in faults)]
    rows.append(_row(NO_FAULT, 0, calm))
    return rows


def saga_runs(
    *,
    submitted: Mapping[str, tuple[str | None, float]],
    transitions: Mapping[str, list[Mapping[str, Any]]],
    settled_states: frozenset[str],
    end: float,
    duplicated: set[str],
    unauthorized: set[str],
    settlements: Mapping[str, list[str]],
) -> list[SagaRun]:
    """`SagaRun`s from what the run recorded: request id -> (saga id, first submit time), each
    saga's transitions (`to`, `at` in epoch seconds), and the sagas with findings."""
    out = []
    for rid, (sid, t0) in sorted(submitted.items()):
        path = transitions.get(sid or "", [])
        first = next((float(t["at"]) for t in path if t["to"] in settled_states), end)
        out.append(
            SagaRun(
                request_id=rid,
                saga_id=sid,
                submitted=t0,
                settled=first if sid else end,
                effect_unknown=any(t["to"] == "effect-unknown" for t in path),
                duplicated=sid in duplicated,
                unauthorized=sid in unauthorized,
                settlements=tuple(settlements.get(sid or "", [])),
            )
        )
    return out


def as_dicts(rows: list[Row]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def markdown(rows: list[dict[str, Any]], margin: float) -> list[str]:
    def num(x: float | None) -> str:
        return "–" if x is None else f"{x:.1f}"

    lines = [
        f"Per fault kind (a saga counts under a kind when its submit→settled window overlaps a fault "
        f"of that kind, from its start to its end plus {margin:.0f} s; p50/p99: submit→settled seconds):",
        "",
        "| fault kind | faults | sagas | lost | duplicated | unauthorized | effect-unknown "
        "| settled: confirmed / absent / undo run again | p50 s | p99 s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['faults']} | {r['sagas']} | {r['lost']} | {r['duplicated']} "
            f"| {r['unauthorized']} | {r['effect_unknown']} | {r['confirmed']} / {r['absent']} / "
            f"{r['undo_retried']} | {num(r['p50'])} | {num(r['p99'])} |"
        )
    return lines


__all__ = [
    "NO_FAULT",
    "RECOVERY_MARGIN",
    "FaultWindow",
    "Row",
    "SagaRun",
    "as_dicts",
    "figures",
    "markdown",
    "percentile",
    "saga_runs",
    "under",
    "windows",
]

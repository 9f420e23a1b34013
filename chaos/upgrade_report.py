"""The rolling upgrade's figures and report: pure functions over what the run saw. No I/O.

A saga belongs to the phase in which its submit began: `before` (only the old
release running), `during` (from the new release's `db upgrade` until the last
process runs the new code) or `after`. Each process prints the folder its
`orchestrator` package was imported from (`pressroom code: PATH`) as the first
line of each start; `code_root` reads it back from the process's log.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

PHASES = ("before", "during", "after")
PROOF = "pressroom code: "
START = "\n=== start "


@dataclass(frozen=True)
class Marks:
    """When the upgrade began and ended, in epoch seconds."""

    began: float
    ended: float


@dataclass(frozen=True)
class SagaTimes:
    submitted_at: float
    saga_id: str | None
    state: str | None = None  # None: not in the database
    finished_at: float | None = None  # its last transition into a terminal state


def phase_at(t: float, marks: Marks) -> str:
    if t < marks.began:
        return "before"
    return "during" if t < marks.ended else "after"


def phase_figures(
    sagas: list[SagaTimes], marks: Marks, terminal: frozenset[str]
) -> dict[str, dict[str, Any]]:
    """Per phase: sagas submitted, their final states, how many finished in a later phase
    (`crossed`: in flight while the release changed under them), sagas that finished in
    this phase whatever their submit phase (`finished_here`), and seconds from submit to
    a terminal state (median and max of those that got there)."""
    out: dict[str, dict[str, Any]] = {}
    for phase in PHASES:
        mine = [s for s in sagas if phase_at(s.submitted_at, marks) == phase]
        done = [s for s in mine if s.state in terminal and s.finished_at is not None]
        spans = [s.finished_at - s.submitted_at for s in done if s.finished_at is not None]
        out[phase] = {
            "submitted": len(mine),
            "states": dict(sorted(Counter(s.state or "missing" for s in mine).items())),
            "crossed": sum(
                1
                for s in mine
                if s.finished_at is None or PHASES.index(phase_at(s.finished_at, marks)) > PHASES.index(phase)
            ),
            "finished_here": sum(
                1
                for s in sagas
                if s.state in terminal
                and s.finished_at is not None
                and phase_at(s.finished_at, marks) == phase
            ),
            "seconds_median": round(statistics.median(spans), 1) if spans else None,
            "seconds_max": round(max(spans), 1) if spans else None,
        }
    return out


def last_start(log_text: str) -> str:
    """The part of a supervisor log written by the process's latest start."""
    return log_text.rsplit(START, 1)[-1]


def code_root(segment: str) -> str | None:
    """The folder a process said its `orchestrator` package came from, or None."""
    for line in segment.splitlines():
        if line.startswith(PROOF):
            return line[len(PROOF) :].strip()
    return None


def wrong_code(proofs: dict[str, str | None], expected: str) -> dict[str, str | None]:
    """The processes whose code did not come from `expected` (None: it never said)."""
    return {name: root for name, root in sorted(proofs.items()) if root != expected}


def error_lines(logs: dict[str, str], limit: int = 12) -> list[tuple[str, str, int]]:
    """(process, line, count) for each kind of `ERROR`/`CRITICAL`/exception line in the logs,
    ids and numbers folded so repeats count as one kind; the most frequent first."""
    kinds: Counter[tuple[str, str]] = Counter()
    for name, text in sorted(logs.items()):
        for line in text.splitlines():
            if re.search(r"\b(ERROR|CRITICAL)\b|^[\w.]+(Error|Exception): ", line):
                folded = re.sub(r"[0-9a-f]{8,}|\d+", "#", line.strip())
                kinds[(name, folded[:200])] += 1
    return [(name, text, n) for (name, text), n in kinds.most_common(limit)]


def _states(states: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in states.items()) or "none"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def markdown(d: dict[str, Any]) -> str:
    """The report: the releases, each step of the upgrade, sagas per phase, the checks."""
    c = d["checker"]
    lines = [
        f"Command: `{d['command']}`, finished {d['finished_at']}.",
        "",
        f"From `{d['from']['ref']}` ({d['from']['commit'][:12]}, schema {d['from']['head']}) "
        f"to the tree at {d['to']['root']} (schema {d['to']['head']}).",
        "",
        f"**Result: {'OK' if d['ok'] else 'FINDINGS (see below)'}.**",
        "",
        "| step | outcome |",
        "|---|---|",
        f"| `db upgrade`, old code | {d['db_upgrade_old']} |",
        f"| `db upgrade`, new code, under load | {d['db_upgrade_new']} |",
        f"| old code starting on the upgraded schema | {d['old_start_after_upgrade']} |",
    ]
    for step in d["restarts"]:
        lines.append(
            f"| restart {step['process']} | exit {step['exit']} after SIGTERM in {step['stop_seconds']:.1f} s,"
            f" running the new code {step['ready_seconds']:.1f} s later |"
        )
    lines += [
        "",
        "| phase | submitted | final states | crossed a phase | finished in it | submit → end, median / max s |",
        "|---|---|---|---|---|---|",
    ]
    for phase in PHASES:
        p = d["phases"][phase]
        lines.append(
            f"| {phase} | {p['submitted']} | {_states(p['states'])} | {p['crossed']} | {p['finished_here']} |"
            f" {_seconds(p['seconds_median'])} / {_seconds(p['seconds_max'])} |"
        )
    lines += [
        "",
        "| check | value |",
        "|---|---|",
        f"| processes whose code was not the release's | {len(d['wrong_code'])} |",
        f"| sagas submitted / in the database | {c['submitted']} / {c['sagas']} |",
        f"| lost | {len(c['lost'])} |",
        f"| stuck (not terminal nor effect-unknown) | {len(c['stuck'])} |",
        f"| duplicated effects | {len(c['duplicates'])} |",
        f"| unauthorized effects | {len(c['unauthorized'])} |",
        f"| orphaned / missing effects | {len(c['orphans'])} / {len(c['missing'])} |",
        f"| effect-unknown, reconciled | {c['effect_unknown']}, {_states(c['reconciled'])} |",
        f"| not terminal at the end | {d['not_terminal']} |",
        f"| dead letters | {d['dead_letters']} |",
        f"| `audit verify` of sagas submitted before the upgrade ended: checked, failing |"
        f" {d['audited']}, {len(d['audit_failures'])} |",
        f"| exits nobody asked for | {len(d['unexpected_exits'])} |",
    ]
    if d.get("dead_letter_reasons"):
        lines += ["", "Dead letters by reason:", ""]
        lines += [f"- `{why}` ×{n}" for why, n in d["dead_letter_reasons"].items()]
    if d["audit_failures"]:
        lines += ["", "Sagas failing `audit verify`:", ""]
        lines += [f"- {sid}: {why}" for sid, why in d["audit_failures"].items()]
    if d["error_lines"]:
        lines += ["", "Error lines in the process logs (first of each kind):", ""]
        lines += [f"- {name}: `{text}` ×{n}" for name, text, n in d["error_lines"]]
    return "\n".join(lines) + "\n"


__all__ = [
    "PHASES",
    "PROOF",
    "Marks",
    "SagaTimes",
    "code_root",
    "error_lines",
    "last_start",
    "markdown",
    "phase_at",
    "phase_figures",
    "wrong_code",
]

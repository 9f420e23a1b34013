"""Fault kinds and the seeded schedule of a run. Pure: no I/O, no clock.

A fault kind is registered once (`register`) with a name, a weight (how
often it is drawn), a hold range (how long it lasts, drawn uniformly), the
targets it picks one of (none: no target), whether it belongs to the late
part of the first round (faults of a destination, once publishing has
begun), seeded options of its own, what it needs of the run (`requires`:
names of the nemesis's extra handles, such as the links' proxies; a run
without them leaves the kind out, `runnable`), and two functions the
nemesis calls: `execute` to inject it and `heal` to undo whatever still
holds when the faults stop. `plan` reads only the pure parts, so a schedule
depends on the seed, the duration and the kinds it is given alone.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chaos.nemesis import Nemesis

Option = tuple[str, float | int | bool | str]


@dataclass(frozen=True)
class Fault:
    at: float  # seconds from the start of the fault phase
    kind: str
    target: str | None
    hold: float
    options: tuple[Option, ...] = ()

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)


Execute = Callable[["Nemesis", Fault], "dict[str, Any] | None"]
Heal = Callable[["Nemesis"], None]
# Draws a fault's own options from the schedule's generator; sees the faults planned before it.
Draw = Callable[[random.Random, list[Fault]], tuple[Option, ...]]


def no_options(_rng: random.Random, _before: list[Fault]) -> tuple[Option, ...]:
    return ()


@dataclass(frozen=True)
class FaultKind:
    name: str
    weight: float
    hold: tuple[float, float]
    execute: Execute
    targets: tuple[str, ...] = ()
    late: bool = False
    draw: Draw = field(default=no_options)
    heal: Heal | None = None
    requires: tuple[str, ...] = ()


REGISTRY: dict[str, FaultKind] = {}


def register(kind: FaultKind) -> FaultKind:
    """Add a kind to the schedules of later runs; a name is registered once."""
    if kind.name in REGISTRY:
        raise ValueError(f"fault kind {kind.name!r} is registered already")
    if kind.weight <= 0 or not 0 <= kind.hold[0] <= kind.hold[1]:
        raise ValueError(f"fault kind {kind.name!r}: weight must be positive, hold a (low, high) range")
    REGISTRY[kind.name] = kind
    return kind


def runnable(have: Collection[str], kinds: Mapping[str, FaultKind] | None = None) -> dict[str, FaultKind]:
    """The kinds (registered ones by default, in their order) whose needs are all in `have`."""
    table = REGISTRY if kinds is None else kinds
    return {name: kind for name, kind in table.items() if set(kind.requires) <= set(have)}


def plan(
    seed: int, duration: float, kinds: Mapping[str, FaultKind] | None = None, *, mean_gap: float = 4.5
) -> list[Fault]:
    """The faults of one run: the same seed and kinds give the same schedule. The first
    round holds every kind once (shuffled; the late kinds last, when publishing has
    begun), so even a short run meets them all; then kinds are drawn by weight."""
    table = dict(REGISTRY if kinds is None else kinds)
    if not table:
        return []
    rng = random.Random(seed)
    names = list(table)
    weights = [table[n].weight for n in names]
    first = [n for n in names if not table[n].late]
    rng.shuffle(first)
    late = [n for n in names if table[n].late]
    rng.shuffle(late)
    first += late
    out: list[Fault] = []
    t = rng.uniform(2.0, 4.0)
    while t < duration:
        kind = table[first.pop(0) if first else rng.choices(names, weights)[0]]
        target = rng.choice(kind.targets) if kind.targets else None
        hold = rng.uniform(*kind.hold)
        options = kind.draw(rng, out)
        out.append(Fault(round(t, 2), kind.name, target, round(hold, 2), options))
        t += rng.expovariate(1.0 / mean_gap)
    return out


__all__ = [
    "REGISTRY",
    "Draw",
    "Execute",
    "Fault",
    "FaultKind",
    "Heal",
    "Option",
    "no_options",
    "plan",
    "register",
    "runnable",
]

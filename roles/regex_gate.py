"""A cheap necessary condition for a regular expression: the literals any match must contain.

`required_literals(pattern)` reads a compiled pattern's parse tree and returns
a set of strings such that every match of the pattern contains at least one
of them (or ``None`` when no such set can be found, e.g. a pattern that is
one character class). Testing ``any(s in text for s in literals)`` is plain
substring search in C, far cheaper than running a large alternation at every
position, so a rule runs only on text that could match it. The analysis is
the classic "required factor" one (as in code-search prefilters): a sequence
needs the best factor of any one of its parts, an alternation needs one
factor of each alternative, an optional part needs nothing.

Pure: no I/O. Patterns are expected to be matched against lower-cased text.
"""

from __future__ import annotations

import re
from re import _constants as c  # type: ignore[attr-defined]
from re import _parser as parser  # type: ignore[attr-defined]
from typing import Any

Factors = frozenset[str] | None
_MIN_LITERAL = 2


def required_literals(pattern: re.Pattern[str]) -> Factors:
    """Strings one of which occurs in every match of `pattern`, or None (no usable gate)."""
    tree = parser.parse(pattern.pattern, pattern.flags)
    found = _sequence(list(tree))
    if found is None or any(len(s) < _MIN_LITERAL for s in found):
        return None
    return frozenset(s.lower() for s in found)


def required_all(pattern: re.Pattern[str]) -> list[frozenset[str]]:
    """Sets of strings, each of which must have a member in every match of `pattern`
    (one set per required part of its top-level sequence); empty when none is known."""
    tree = parser.parse(pattern.pattern, pattern.flags)
    return [
        frozenset(x.lower() for x in found)
        for found in _parts(list(tree))
        if all(len(x) >= _MIN_LITERAL for x in found)
    ]


def _parts(items: list[tuple[Any, Any]]) -> list[frozenset[str]]:
    """The factor sets of each literal run and each required part of a sequence."""
    candidates: list[frozenset[str]] = []
    run = ""
    for op, arg in items:
        if op is c.LITERAL:
            run += chr(arg)
            continue
        if run:
            candidates.append(frozenset({run}))
            run = ""
        part = _node(op, arg)
        if part:
            candidates.append(part)
    if run:
        candidates.append(frozenset({run}))
    return candidates


def _sequence(items: list[tuple[Any, Any]]) -> Factors:
    """The best factor set among a sequence's literal runs and parts."""
    candidates: list[frozenset[str]] = []
    run = ""
    for op, arg in items:
        if op is c.LITERAL:
            run += chr(arg)
            continue
        if run:
            candidates.append(frozenset({run}))
            run = ""
        part = _node(op, arg)
        if part:
            candidates.append(part)
    if run:
        candidates.append(frozenset({run}))
    if not candidates:
        return None
    return max(candidates, key=lambda s: (min(len(x) for x in s), -len(s)))


def _node(op: Any, arg: Any) -> Factors:
    if op is c.SUBPATTERN:
        return _sequence(list(arg[-1]))
    if op is c.BRANCH:
        union: set[str] = set()
        for alternative in arg[1]:
            part = _sequence(list(alternative))
            if not part:
                return None
            union |= part
        return frozenset(union)
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
        low, _high, body = arg
        return _sequence(list(body)) if low >= 1 else None
    if op is c.ATOMIC_GROUP:
        return _sequence(list(arg))
    return None  # a class, any, an assertion, a back reference: nothing required


def gate(pattern: re.Pattern[str]) -> Any:
    """A predicate ``text -> bool`` that is False only when `pattern` cannot match `text`."""
    needed = [tuple(sorted(found, key=len, reverse=True)) for found in required_all(pattern)]
    needed.sort(key=lambda found: -min(len(x) for x in found))  # the most selective first
    return lambda text: all(any(s in text for s in found) for found in needed)


__all__ = ["gate", "required_literals"]

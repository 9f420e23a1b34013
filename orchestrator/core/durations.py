"""Durations as people write them: `90`, `90s`, `30m`, `2h`, `7d`. No I/O."""

from __future__ import annotations

import re
from datetime import timedelta

from orchestrator.core.errors import InvalidInput

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_PATTERN = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
MAX_DURATION_DAYS = 36600  # a hundred years and then some


def parse_duration(text: str) -> timedelta:
    """A positive timedelta, or `InvalidInput` naming the text."""
    m = _PATTERN.fullmatch(text or "")
    if not m:
        raise InvalidInput(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 1d)")
    value = float(m.group(1)) * _UNITS[m.group(2)]
    if value <= 0:
        raise InvalidInput("a duration must be positive")
    if value > MAX_DURATION_DAYS * 86400:  # also keeps `now + duration` a representable date
        raise InvalidInput(f"a duration must be at most {MAX_DURATION_DAYS}d, got {text.strip()[:40]!r}")
    return timedelta(seconds=value)


def seconds(text: str | float | int) -> float:
    """A setting's value in seconds: a number is taken as seconds, text is parsed."""
    if isinstance(text, int | float):
        if text <= 0:
            raise InvalidInput("a duration must be positive")
        return float(text)
    return parse_duration(str(text)).total_seconds()


__all__ = ["MAX_DURATION_DAYS", "parse_duration", "seconds"]

"""Bounded parse: raw tool arguments to a JSON object, within limits.

Runs before schema validation so an oversized or deeply nested payload is
refused before any model code looks at it. No I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParseLimits:
    max_bytes: int = 64 * 1024
    max_depth: int = 8
    max_string: int = 32 * 1024
    max_items: int = 1000


DEFAULT_LIMITS = ParseLimits()


class ParseRefused(ValueError):
    """The arguments break a limit or are not a JSON object."""


def bounded_parse(raw: str | bytes | dict[str, Any], limits: ParseLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Decode and check `raw`; raise `ParseRefused` with the reason."""
    if isinstance(raw, dict):
        text = json.dumps(raw, default=str)
        value: Any = raw
    else:
        if isinstance(raw, bytes):
            if len(raw) > limits.max_bytes:
                raise ParseRefused(f"arguments exceed {limits.max_bytes} bytes")
            try:
                text = raw.decode("utf-8", errors="strict")
            except UnicodeDecodeError:
                raise ParseRefused("arguments are not UTF-8 text") from None
        else:
            text = raw
        if len(text.encode("utf-8", errors="surrogatepass")) > limits.max_bytes:
            raise ParseRefused(f"arguments exceed {limits.max_bytes} bytes")
        _check_nesting(text, limits.max_depth)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParseRefused(f"arguments are not valid JSON: {exc.msg} at position {exc.pos}") from None
    if len(text.encode("utf-8")) > limits.max_bytes:
        raise ParseRefused(f"arguments exceed {limits.max_bytes} bytes")
    if not isinstance(value, dict):
        raise ParseRefused("arguments must be a JSON object")
    _check(value, limits, depth=1)
    return value


def _check_nesting(text: str, max_depth: int) -> None:
    """Refuse deep nesting before the JSON decoder recurses into it.

    A linear scan over brackets outside strings: a few kilobytes of `[[[[…`
    would otherwise exhaust the decoder's recursion long before the byte limit.
    """
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                raise ParseRefused(f"arguments nest deeper than {max_depth} levels")
        elif ch in "]}":
            depth -= 1


def _check(value: Any, limits: ParseLimits, depth: int) -> None:
    if depth > limits.max_depth:
        raise ParseRefused(f"arguments nest deeper than {limits.max_depth} levels")
    if isinstance(value, str):
        if len(value) > limits.max_string:
            raise ParseRefused(f"a string argument exceeds {limits.max_string} characters")
    elif isinstance(value, dict):
        if len(value) > limits.max_items:
            raise ParseRefused(f"an object has more than {limits.max_items} keys")
        for key, item in value.items():
            _check(key, limits, depth)
            _check(item, limits, depth + 1)
    elif isinstance(value, list):
        if len(value) > limits.max_items:
            raise ParseRefused(f"a list has more than {limits.max_items} items")
        for item in value:
            _check(item, limits, depth + 1)


__all__ = ["DEFAULT_LIMITS", "ParseLimits", "ParseRefused", "bounded_parse"]

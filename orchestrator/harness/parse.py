"""Bounded parse: raw tool arguments to a JSON object, within limits.

Runs before schema validation so an oversized or deeply nested payload is
refused before any model code looks at it. `strict_loads` is the one JSON
decoder for text from outside (tool arguments, HTTP bodies, MCP messages):
nesting bounded before the decoder recurses, and an object naming a key
twice refused (a decoder that keeps the last one would let two readers of
the same bytes see two different requests). No I/O.
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


class DuplicateKey(ParseRefused):
    """A JSON object names one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key[:60]!r} in a JSON object")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(key)
        seen[key] = value
    return seen


def strict_loads(text: str, max_depth: int) -> Any:
    """`json.loads` with nesting bounded to `max_depth` and duplicate keys refused (`ParseRefused`)."""
    _check_nesting(text, max_depth)
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ParseRefused(f"not valid JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:  # unreachable after the nesting check; a refusal all the same
        raise ParseRefused(f"JSON nests deeper than {max_depth} levels") from None


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
        try:
            value = strict_loads(text, limits.max_depth)
        except ParseRefused as exc:
            raise ParseRefused(f"arguments: {exc}") from None
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
                raise ParseRefused(f"JSON nests deeper than {max_depth} levels")
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


__all__ = ["DEFAULT_LIMITS", "DuplicateKey", "ParseLimits", "ParseRefused", "bounded_parse", "strict_loads"]

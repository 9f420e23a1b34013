"""MCP messages that name a JSON key twice: caught before the SDK decodes them.

The SDK's decoder keeps the last of two equal keys, so by the time a
`tools/call` reaches our handler, `{"saga_id": "a", "saga_id": "b"}` has
become one request and nobody can tell. These transport wrappers read each
message as it arrives (a stdio line, an HTTP body), and when a `tools/call`
holds a duplicate key they mark it: its `_meta` gets `DUPLICATE_META` with the
arguments re-spelt exactly as sent, duplicates kept. The server then hands
that text to the harness, whose bounded parse refuses it (an event records
the refusal) and the client gets an error result. Other messages pass
unchanged. No I/O here beyond the wrapped streams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.harness.parse import DuplicateKey, ParseRefused, strict_loads

DUPLICATE_META = "pressroom/duplicate-keys"
MAX_DEPTH = 64
MAX_HTTP_BODY = 4 * 1024 * 1024


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as decoded, every key kept in order."""


def _dump(value: Any) -> str:
    if isinstance(value, _Pairs):
        return "{" + ",".join(json.dumps(k) + ":" + _dump(v) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    return json.dumps(value)


def _get(pairs: Any, key: str) -> Any:
    if not isinstance(pairs, _Pairs):
        return None
    return next((v for k, v in reversed(pairs) if k == key), None)


def _mark(exact: Any, message: Any, reason: str) -> Any:
    """`message` (last-wins decoding) with its duplicate-key note, when it is a tools/call."""
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return message
    params = message.get("params")
    if not isinstance(params, dict):
        return message
    arguments = _get(_get(exact, "params"), "arguments")
    found = params.get("_meta")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    note = {"reason": reason, "arguments": _dump(arguments) if arguments is not None else None}
    return {**message, "params": {**params, "_meta": {**meta, DUPLICATE_META: note}}}


def mark_duplicates(text: str) -> str:
    """`text` unchanged, or re-spelt with the note when a tools/call names a key twice."""
    try:
        strict_loads(text, MAX_DEPTH)
        return text
    except DuplicateKey as exc:
        reason = str(exc)
    except ParseRefused:
        return text  # not ours to answer: the SDK reports its own parse error
    exact = json.loads(text, object_pairs_hook=_Pairs)
    loose = json.loads(text)
    if isinstance(loose, list) and isinstance(exact, list):
        return json.dumps([_mark(e, m, reason) for e, m in zip(exact, loose, strict=True)])
    return json.dumps(_mark(exact, loose, reason))


def holds_duplicate(text: str) -> bool:
    """Whether `text` is JSON naming some key twice."""
    try:
        strict_loads(text, MAX_DEPTH)
    except DuplicateKey:
        return True
    except ParseRefused:
        return False
    return False


def duplicate_arguments(meta: Any) -> tuple[str, str | None] | None:
    """(reason, arguments as sent) when the transport marked this call; None otherwise."""
    if not isinstance(meta, dict):
        return None
    note = meta.get(DUPLICATE_META)
    if not isinstance(note, dict):
        return None
    arguments = note.get("arguments")
    return str(note.get("reason") or "duplicate key"), arguments if isinstance(arguments, str) else None


class MarkedLines:
    """An async line source (the stdio transport's stdin) with duplicate keys marked."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        async for line in self._lines:
            yield mark_duplicates(line) if line.strip() else line


class MarkDuplicates:
    """ASGI middleware: a POSTed MCP body with duplicate keys marked before the SDK reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= MAX_HTTP_BODY:
            message = await receive()
            if message["type"] != "http.request":
                more = False
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        if not more:
            try:
                body = mark_duplicates(body.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                pass  # not UTF-8: passed on as sent, and the SDK answers it with a parse error
        first = True

        async def replay() -> Message:
            nonlocal first
            if not first:
                return await receive()
            first = False
            return {"type": "http.request", "body": body, "more_body": more}

        await self.app(scope, replay, send)


__all__ = [
    "DUPLICATE_META",
    "MarkDuplicates",
    "MarkedLines",
    "duplicate_arguments",
    "holds_duplicate",
    "mark_duplicates",
]

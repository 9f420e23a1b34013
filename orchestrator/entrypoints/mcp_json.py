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

A message holding an integer too long for Python to convert (more than
`sys.get_int_max_str_digits()` digits: the SDK's decoder calls it "number out
of range", Python's raises ValueError) would otherwise be dropped without an
answer, or end the transport. Instead a request with a usable id is re-spelt
as a `REFUSED_METHOD` request with that id, which the server answers with a
JSON-RPC error (-32602, one line saying what is wrong) and then goes on; over
HTTP the middleware answers 400 with that JSON-RPC error at once. A
notification, or a request whose id is itself such a number, cannot be
answered: it is dropped (stdio) or answered with id null (HTTP).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.harness.parse import DuplicateKey, ParseRefused, strict_loads

DUPLICATE_META = "pressroom/duplicate-keys"
REFUSED_METHOD = "pressroom/refused"
OVERSIZED = "refused: the message holds an integer with too many digits"
MAX_DEPTH = 64
MAX_HTTP_BODY = 4 * 1024 * 1024
log = logging.getLogger(__name__)


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


def _lenient_int(digits: str) -> int | None:
    try:
        return int(digits)
    except ValueError:  # more digits than Python converts
        return None


def oversized_request_id(text: str) -> str | int | None:
    """The id of the request in `text` (already known to hold an oversized integer), or None."""
    try:
        message = json.loads(text, parse_int=_lenient_int)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    ident = message.get("id")
    return (
        ident if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)) else None
    )


def _refused(text: str) -> str | None:
    """The refusal request to hand the SDK in place of `text`, or None (nothing to answer)."""
    ident = oversized_request_id(text)
    if ident is None:
        return None
    return json.dumps(
        {"jsonrpc": "2.0", "id": ident, "method": REFUSED_METHOD, "params": {"reason": OVERSIZED}}
    )


def oversized_answer(text: str) -> dict[str, Any]:
    """The JSON-RPC error for a message holding an oversized integer (HTTP answers it at once)."""
    error = {"code": -32602, "message": OVERSIZED}
    return {"jsonrpc": "2.0", "id": oversized_request_id(text), "error": error}


def holds_oversized(text: str) -> bool:
    """Whether `text` is JSON (within the nesting bound) holding an integer Python cannot convert."""
    try:
        strict_loads(text, MAX_DEPTH)
    except ParseRefused:
        return False
    except ValueError:
        return True
    return False


def mark_duplicates(text: str) -> str | None:
    """`text` unchanged, or re-spelt with the note when a tools/call names a key twice, or
    the refusal request for a message holding an oversized integer (None: not answerable)."""
    try:
        strict_loads(text, MAX_DEPTH)
        return text
    except DuplicateKey as exc:
        reason = str(exc)
    except ParseRefused:
        return text  # not ours to answer: the SDK reports its own parse error
    except ValueError:  # not a ParseRefused: an integer too long to convert
        return _refused(text)
    try:
        exact = json.loads(text, object_pairs_hook=_Pairs)
        loose = json.loads(text)
    except ValueError:
        return _refused(text)
    if isinstance(loose, list) and isinstance(exact, list):
        return json.dumps([_mark(e, m, reason) for e, m in zip(exact, loose, strict=True)])
    return json.dumps(_mark(exact, loose, reason))


def holds_duplicate(text: str) -> bool:
    """Whether `text` is JSON naming some key twice."""
    try:
        strict_loads(text, MAX_DEPTH)
    except DuplicateKey:
        return True
    except ValueError:  # not JSON, too deep, or an integer too long to convert
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
            if not line.strip():
                yield line
                continue
            marked = mark_duplicates(line)
            if marked is None:
                log.warning(
                    "dropped an MCP message holding an integer with too many digits (no id to answer)"
                )
                continue
            yield marked


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
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text = None  # not UTF-8: passed on as sent, and the SDK answers it with a parse error
            if text is not None and holds_oversized(text):
                refused = JSONResponse(oversized_answer(text), status_code=400)
                await refused(scope, receive, send)
                return
            if text is not None:
                body = (mark_duplicates(text) or text).encode("utf-8")
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
    "OVERSIZED",
    "REFUSED_METHOD",
    "MarkDuplicates",
    "MarkedLines",
    "duplicate_arguments",
    "holds_duplicate",
    "holds_oversized",
    "mark_duplicates",
    "oversized_answer",
]

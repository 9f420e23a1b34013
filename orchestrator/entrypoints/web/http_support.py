"""What the API and the pages share: the error-to-status table, bounded bodies, a guard.

- `status_for(error)`: the one place a Pressroom error becomes an HTTP status
  (InvalidInput 400, NotFound 404, NotAuthenticated 401, NotPermitted 403,
  other Refused 409), the HTTP
  twin of `errors.exit_code_for`.
- `read_body(request, limit)`: the request body, refused with 413 past `limit`.
- `whole_number(text, what)`: a number from outside (path, query, form) as an
  int, or `InvalidInput` (400) unless it is 1-10 ASCII digits no larger than
  `MAX_WHOLE` (2**31 - 1, PostgreSQL's integer): never Python's ValueError for
  a 5,000-digit string, never a number the database cannot hold. Importing
  this module makes Starlette's `{name:int}` path convertor use it, so every
  such route of the API and the pages answers 400 instead of a 500.
- `Guard`: ASGI middleware that adds security headers to every response
  (no framing, no script, no sniffing) and, when given an allow-list,
  refuses requests whose `Host` is not on it (a DNS-rebinding defence for a
  server bound to the loopback address).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.core.errors import (
    ApprovalRequired,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    NotPermitted,
    PressroomError,
    Refused,
)

ERROR_STATUS: tuple[tuple[type[PressroomError], int], ...] = (
    (InvalidInput, 400),
    (NotFound, 404),
    (NotAuthenticated, 401),
    (NotPermitted, 403),
    (Refused, 409),
    (ApprovalRequired, 409),
)

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "content-security-policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null`
    # with our own form posts, and the pages' origin check must see the real one.
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_WHOLE = 2**31 - 1


def whole_number(text: str | None, what: str, *, maximum: int = MAX_WHOLE) -> int:
    """`text` as a whole number 0..`maximum`; InvalidInput (400) otherwise, whatever its length."""
    value = (text or "").strip()
    if not value or len(value) > 10 or not (value.isascii() and value.isdigit()) or int(value) > maximum:
        raise InvalidInput(f"{what} must be a whole number from 0 to {maximum}")
    return int(value)


class WholeNumber(Convertor[int]):
    """`{name:int}` in a route: digits only, and bounded (a 400, not a 500, past the bound)."""

    regex = "[0-9]+"

    def convert(self, value: str) -> int:
        return whole_number(value, "a number in the path")

    def to_string(self, value: int) -> str:
        return str(int(value))


# Routes compile their paths when they are built; every route module imports this one first.
register_url_convertor("int", WholeNumber())


def status_for(error: PressroomError) -> int:
    """The HTTP status of a Pressroom error; anything not in the table is a 500."""
    for cls, code in ERROR_STATUS:
        if isinstance(error, cls):
            return code
    return 500


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 15 or int(declared) > limit):
        raise HTTPException(413, f"the request body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"the request body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def host_name(header: str) -> str:
    """`Host` header → host name without the port (`[::1]:8080` → `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        return header[1:end] if end > 0 else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """Security headers on every response; an optional `Host` allow-list."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] | None = None) -> None:
        self.app = app
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.allowed_hosts is not None:
            host = host_name(Headers(scope=scope).get("host", ""))
            if host not in self.allowed_hosts:
                refused = PlainTextResponse("unexpected Host header", status_code=400)
                await refused(scope, receive, send)
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


__all__ = [
    "ERROR_STATUS",
    "LOOPBACK_HOSTS",
    "MAX_WHOLE",
    "SECURITY_HEADERS",
    "Guard",
    "WholeNumber",
    "host_name",
    "media_type",
    "read_body",
    "status_for",
    "whole_number",
]

"""Live saga pages: a Server-Sent Events stream, the page script, and its Content-Security-Policy.

- `GET /sagas/{id}/live` (text/event-stream): a `moved` event whenever the
  saga's fingerprint (state, head version, last event, update time) differs
  from the one the page was rendered with (`?since=`, or the stream's
  `Last-Event-ID` after a reconnect); the event id is the new fingerprint.
  The saga is read once a second; a comment line every 15 seconds keeps
  proxies from closing an idle stream; the stream ends after
  `STREAM_SECONDS` and the browser reconnects on its own. In closed mode it
  needs a signed-in visitor, checked again on every read, so a revoked
  session stops receiving at once (401 before the stream starts).
- `GET /static/workspace.js`: the page script (plain JavaScript shipped in
  the package, no build step). On `moved` it fetches the page again and
  replaces each `[data-live]` section whose HTML changed, so state,
  destinations, versions, history and timeline follow the saga without a
  reload, and a form being filled in is left alone while it is unchanged.
- The pages that load the script answer with the site's policy plus
  `script-src 'nonce-…'` (a fresh nonce per response, carried by the one
  script tag) and `connect-src 'self'` (the stream and the refetch); every
  other page keeps the policy without any script.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from orchestrator.entrypoints.http_support import SECURITY_HEADERS

POLL_SECONDS: Final = 1.0
HEARTBEAT_SECONDS: Final = 15.0
STREAM_SECONDS: Final = 55.0
SCRIPT_PATH: Final = "/static/workspace.js"
_BASE_POLICY: Final = dict(SECURITY_HEADERS)["content-security-policy"]


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def script_policy(nonce: str) -> str:
    """The site's policy, allowing only the script carrying `nonce` and same-origin fetches."""
    return _BASE_POLICY.replace(
        "default-src 'none';", f"default-src 'none'; script-src 'nonce-{nonce}'; connect-src 'self';", 1
    )


def page_script() -> Response:
    body = files("orchestrator.entrypoints").joinpath("templates/workspace.js").read_text(encoding="utf-8")
    return Response(body, media_type="text/javascript")


def _frame(event: str, data: object, event_id: str | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return "\n".join(lines) + "\n\n"


def stream(
    request: Request,
    since: str,
    fingerprint: Callable[[], str],
    still_allowed: Callable[[], bool],
    *,
    poll: float = POLL_SECONDS,
    lifetime: float = STREAM_SECONDS,
) -> Response:
    """The event stream of one saga page (see the module docstring)."""

    async def events() -> AsyncIterator[str]:
        last = since
        yield "retry: 2000\n\n"
        ends = time.monotonic() + lifetime
        quiet_since = time.monotonic()
        while time.monotonic() < ends:
            if await request.is_disconnected():
                return
            if not await run_in_threadpool(still_allowed):
                yield _frame("signed-out", {"reason": "the session has ended; sign in again"})
                return
            now = await run_in_threadpool(fingerprint)
            if now != last:
                yield _frame("moved", {"fingerprint": now}, now)
                last = now
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                yield ": still here\n\n"
                quiet_since = time.monotonic()
            await asyncio.sleep(poll)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def not_signed_in() -> Response:
    return PlainTextResponse("not signed in: sign in at /sign-in", status_code=401)


__all__ = [
    "SCRIPT_PATH",
    "new_nonce",
    "not_signed_in",
    "page_script",
    "script_policy",
    "stream",
]

"""Live saga pages: a Server-Sent Events stream, the page script, and its Content-Security-Policy.

- `GET /sagas/{id}/live` (text/event-stream): a `moved` event whenever the
  saga's fingerprint (state, head version, last event, update time) differs
  from the one the page was rendered with (`?since=`, or the stream's
  `Last-Event-ID` after a reconnect); the event id is the new fingerprint.
  Streams do not read the database themselves: one `LiveHub` per server
  polls once a second, in one worker-thread call, the fingerprint of each
  saga watched (once per saga, however many streams watch it) and the
  sign-in of each distinct credential, then wakes the streams, which wait on
  the event loop and hold no thread. So the API's other answers do not wait
  behind the streams. Streams are bounded per user (`PRESSROOM_LIVE_STREAMS_PER_USER`,
  the principal in closed mode, the peer address in open mode) and in all
  (`PRESSROOM_LIVE_STREAMS_TOTAL`): one more is HTTP 429 with a JSON error.
  A comment line every 15 seconds keeps proxies from closing an idle stream;
  the stream ends after `STREAM_SECONDS` and the browser reconnects on its
  own. In closed mode it needs a signed-in visitor, checked again on every
  poll, so a revoked session stops receiving at once (401 before the stream
  starts).
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
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from orchestrator.entrypoints.web.http_support import SECURITY_HEADERS

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
    body = (
        files("orchestrator.entrypoints.web").joinpath("templates/workspace.js").read_text(encoding="utf-8")
    )
    return Response(body, media_type="text/javascript")


def _frame(event: str, data: object, event_id: str | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return "\n".join(lines) + "\n\n"


@dataclass(eq=False)
class Watcher:
    """One open stream: what it watches, for whom, and what the last poll found."""

    user: str
    saga_id: str
    credential: str
    still_allowed: Callable[[], bool]
    expires: float
    fingerprint: str | None = None
    allowed: bool = True
    woken: asyncio.Event = field(default_factory=asyncio.Event)


class TooManyStreams(Exception):
    """More live streams than the bound: answered 429."""


class LiveHub:
    """The streams of one server: bounded, and fed by one poller (see the module docstring).

    `fingerprints(saga_ids)` reads each saga's fingerprint; both it and each watcher's
    `still_allowed` run in one worker-thread call per poll."""

    def __init__(
        self,
        fingerprints: Callable[[list[str]], dict[str, str]],
        *,
        per_user: int,
        total: int,
        poll: float = POLL_SECONDS,
    ) -> None:
        self.fingerprints = fingerprints
        self.per_user = per_user
        self.total = total
        self.poll = poll
        self.watchers: set[Watcher] = set()
        self._task: asyncio.Task[None] | None = None

    def count(self, user: str | None = None) -> int:
        return sum(1 for w in self.watchers if user is None or w.user == user)

    def open(
        self, user: str, saga_id: str, credential: str, still_allowed: Callable[[], bool], lifetime: float
    ) -> Watcher:
        """Register a stream, or raise `TooManyStreams`."""
        now = time.monotonic()
        self.watchers -= {w for w in self.watchers if w.expires < now}  # streams never started
        if self.count(user) >= self.per_user:
            raise TooManyStreams(f"at most {self.per_user} live streams per user are open at once")
        if len(self.watchers) >= self.total:
            raise TooManyStreams(f"at most {self.total} live streams are open at once; try again later")
        watcher = Watcher(user, saga_id, credential, still_allowed, now + lifetime + 5 * self.poll)
        self.watchers.add(watcher)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        return watcher

    def close(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    async def _run(self) -> None:
        while self.watchers:
            await self.poll_once()
            await asyncio.sleep(self.poll)

    async def poll_once(self) -> None:
        watchers = list(self.watchers)
        sagas = sorted({w.saga_id for w in watchers})
        checks = {w.credential: w.still_allowed for w in watchers}

        def read() -> tuple[dict[str, str], dict[str, bool]]:
            allowed = {credential: check() for credential, check in checks.items()}
            return self.fingerprints(sagas), allowed

        with contextlib.suppress(Exception):  # a failed read: the streams wait for the next poll
            found, allowed = await run_in_threadpool(read)
            for w in watchers:
                w.fingerprint = found.get(w.saga_id, w.fingerprint)
                w.allowed = allowed.get(w.credential, False)
                w.woken.set()


def too_many(reason: str) -> Response:
    return JSONResponse(
        {"error": reason, "kind": "TooManyStreams"}, status_code=429, headers={"retry-after": "5"}
    )


def stream(
    request: Request, since: str, hub: LiveHub, watcher: Watcher, *, lifetime: float = STREAM_SECONDS
) -> Response:
    """The event stream of one saga page (see the module docstring); `watcher` is open in `hub`."""

    async def events() -> AsyncIterator[str]:
        try:
            last = since
            yield "retry: 2000\n\n"
            ends = time.monotonic() + lifetime
            quiet_since = time.monotonic()
            while time.monotonic() < ends:
                if await request.is_disconnected():
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watcher.woken.wait(), timeout=max(hub.poll * 2, 0.1))
                watcher.woken.clear()
                if not watcher.allowed:
                    yield _frame("signed-out", {"reason": "the session has ended; sign in again"})
                    return
                now = watcher.fingerprint
                if now is not None and now != last:
                    yield _frame("moved", {"fingerprint": now}, now)
                    last = now
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                    yield ": still here\n\n"
                    quiet_since = time.monotonic()
        finally:
            hub.close(watcher)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def not_signed_in() -> Response:
    return PlainTextResponse("not signed in: sign in at /sign-in", status_code=401)


__all__ = [
    "SCRIPT_PATH",
    "LiveHub",
    "TooManyStreams",
    "Watcher",
    "new_nonce",
    "not_signed_in",
    "page_script",
    "script_policy",
    "stream",
    "too_many",
]

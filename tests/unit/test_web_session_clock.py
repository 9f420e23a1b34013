"""A web session's cookie is stamped, and its age judged, on the clock the pages are given
(the application's: the database's time), never the host's wall clock; no services."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.core.clock import ManualClock
from orchestrator.entrypoints.web.auth import SESSION_COOKIE, WebAuth
from orchestrator.harness.principals import Principal

ERIN = Principal(id="u1", name="erin", display="Erin", auth="proxy")
TTL = 60


class OneSession:
    """The people store's part a session uses: one session, `sid`, always live in the store."""

    def is_open(self) -> bool:
        return False

    def create_session(self, principal: Principal, ttl_seconds: float) -> str:
        return "sid"

    def session_principal(self, session_id: str) -> Principal | None:
        return ERIN if session_id == "sid" else None


def _request(cookie: str) -> Request:
    return Request(
        {
            "type": "http",
            "method": "GET",
            "scheme": "http",
            "path": "/",
            "query_string": b"",
            "server": ("pressroom.test", 80),
            "client": ("192.0.2.1", 50000),
            "headers": [(b"host", b"pressroom.test"), (b"cookie", f"{SESSION_COOKIE}={cookie}".encode())],
        }
    )


def test_a_cookies_age_is_read_on_the_pages_clock() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))  # far from this host's wall clock
    auth = WebAuth(OneSession(), signing_key=b"k", form_token="t", session_ttl=TTL, clock=clock)  # type: ignore[arg-type]
    response = Response()
    auth.start_session(ERIN, response, secure=False)
    cookie = response.headers["set-cookie"].split(";")[0].split("=", 1)[1].strip('"')
    clock.advance(TTL - 1)
    assert auth.visitor(_request(cookie)).principal == ERIN
    clock.advance(2)
    assert auth.visitor(_request(cookie)).principal is None, "older than the session's lifetime"

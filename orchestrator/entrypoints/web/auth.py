"""Who is using the web pages: open mode, a signed-in session, or a trusted proxy's user.

- Open mode (no user exists): nobody signs in; forms carry the per-process
  form token and a typed name, recorded as unverified, as before people existed.
- Closed mode: the visitor is, in this order,
  1. the user a trusted proxy names in `PRESSROOM_TRUSTED_PROXY_HEADER`, when
     the socket peer is in `PRESSROOM_TRUSTED_PROXIES` (from any other peer
     the header is ignored); a name that is not an active user signs nobody in;
  2. the user of the session in the `pressroom_session` cookie: a random
     session id, signed with a key derived from `PRESSROOM_SECRET`
     (itsdangerous, with the session's lifetime as its maximum age), whose
     sha256 is looked up in the people store's `web_sessions` table on every
     request, so `pressroom users revoke` ends it at once; the cookie's age and
     the session's expiry are both read on the database's clock, so every
     `serve` process judges them alike whatever its host's clock says;
  3. nobody: pages redirect to `/sign-in`, form posts answer 401.
- Sign-in takes the person's API token (`pressroom users add` / `users
  token` prints it), checks it with the people store and starts a session.
  The cookie is HttpOnly, SameSite=Strict, Path=/, and Secure when the browser
  talks https (the request's own scheme, or `X-Forwarded-Proto: https` from a
  trusted proxy).
- Every form POST passes two checks before anything else: its `Origin` (or
  `Referer`) is this site (`web_rules.origin_refusal`; in closed mode one of
  them must be present), and its `form_token` is the visitor's: bound to the
  session (or to the proxy's user) in closed mode, the per-process token in
  open mode and on the sign-in form. Either failing is 403.

This module reads requests and the people store; the rules are in `web_rules`.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Literal

from itsdangerous import BadSignature, TimestampSigner
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from orchestrator.core.clock import DATABASE_TIME, Clock
from orchestrator.core.errors import NotAuthenticated
from orchestrator.entrypoints.web import rules as web_rules
from orchestrator.entrypoints.web.pages import Viewer
from orchestrator.harness.principals import Principal
from orchestrator.store.people import PeopleStore

SESSION_COOKIE = "pressroom_session"

Mode = Literal["open", "closed"]


@dataclass(frozen=True)
class Visitor:
    """One request's visitor, resolved once per request."""

    mode: Mode
    principal: Principal | None
    binding: str | None  # what the visitor's form token is bound to (closed mode, signed in)
    session_id: str | None  # the clear session id from the cookie, to end it on sign-out
    origin: str  # this site's origin as the browser sees it
    secure: bool  # the browser talks https
    refused: str | None = None  # why a proxy's or a cookie's user was not signed in

    @property
    def signed_in(self) -> bool:
        return self.principal is not None


class ClockedSigner(TimestampSigner):
    """A timestamped signer whose stamps, and the ages it judges, are read on `clock`."""

    def __init__(self, key: bytes, *, salt: str, clock: Clock) -> None:
        super().__init__(key, salt=salt)
        self.clock = clock

    def get_timestamp(self) -> int:
        return int(self.clock.now().timestamp())


class WebAuth:
    """Resolves visitors, starts and ends sessions, and checks form posts; a cookie's age is
    read on `clock` (the application's: the database's time)."""

    def __init__(
        self,
        people: PeopleStore,
        *,
        signing_key: bytes,
        form_token: str,
        session_ttl: float,
        proxy_header: str | None = None,
        trusted_proxies: str | None = None,
        clock: Clock = DATABASE_TIME,
    ) -> None:
        self.people = people
        self.form_token = form_token
        self.session_ttl = session_ttl
        self.proxy_header = web_rules.check_header_name(proxy_header) if proxy_header else None
        self.proxies = web_rules.parse_proxies(trusted_proxies)
        self._csrf_key = web_rules.csrf_key(signing_key)
        cookie_key = hmac.new(signing_key, b"pressroom web session cookie v1", "sha256").digest()
        self._signer = ClockedSigner(cookie_key, salt="pressroom.web-session", clock=clock)

    # -- who is this? ------------------------------------------------------------
    def visitor(self, request: Request) -> Visitor:
        """The request's visitor (blocking: reads the people store)."""
        trusted = web_rules.is_trusted(request.client.host if request.client else None, self.proxies)
        secure = request.url.scheme == "https" or (
            trusted and web_rules.first_value(request.headers.get("x-forwarded-proto")).lower() == "https"
        )
        host = (
            trusted and web_rules.first_value(request.headers.get("x-forwarded-host"))
        ) or request.headers.get("host", "")
        origin = web_rules.site_origin("https" if secure else "http", host)
        if self.people.is_open():
            return Visitor("open", None, None, None, origin, secure)
        if trusted and self.proxy_header and request.headers.get(self.proxy_header, "").strip():
            name = request.headers[self.proxy_header].strip()
            principal = self.people.principal_by_name(name, auth="proxy")
            if principal is None:
                why = "the proxy names someone who is not an active user"
                return Visitor("closed", None, None, None, origin, secure, refused=why)
            return Visitor("closed", principal, f"proxy:{principal.id}", None, origin, secure)
        session_id = self._session_id(request)
        if session_id is not None:
            principal = self.people.session_principal(session_id)
            if principal is not None:
                return Visitor("closed", principal, f"session:{session_id}", session_id, origin, secure)
            why = "your session has ended (signed out, expired, or the user was revoked); sign in again"
            return Visitor("closed", None, None, None, origin, secure, refused=why)
        return Visitor("closed", None, None, None, origin, secure)

    def _session_id(self, request: Request) -> str | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie or len(cookie) > 500:
            return None
        try:
            return self._signer.unsign(cookie, max_age=int(self.session_ttl)).decode()
        except (BadSignature, UnicodeDecodeError):  # SignatureExpired is a BadSignature
            return None

    # -- what the pages show and the forms carry -----------------------------------
    def token_for(self, visitor: Visitor) -> str:
        """The form token the visitor's forms carry."""
        if visitor.binding is not None:
            return web_rules.csrf_token(self._csrf_key, visitor.binding)
        return self.form_token

    def viewer(self, visitor: Visitor) -> Viewer:
        name = visitor.principal.display if visitor.principal else None
        roles = tuple(sorted(r.value for r in visitor.principal.roles)) if visitor.principal else ()
        proxied = visitor.principal is not None and visitor.principal.auth == "proxy"
        return Viewer(
            mode=visitor.mode, name=name, roles=roles, csrf=self.token_for(visitor), proxied=proxied
        )

    # -- checks ---------------------------------------------------------------------
    def check_post(self, request: Request, visitor: Visitor, sent_token: str, *, acting: bool) -> None:
        """403 unless the POST comes from this site and carries the visitor's form token.

        With `acting` (a form that acts as the visitor), a closed-mode visitor
        who is not signed in is answered 401 once the origin is known to be ours.
        """
        why = web_rules.origin_refusal(
            request.headers.get("origin"),
            request.headers.get("referer"),
            visitor.origin,
            required=visitor.mode == "closed",
        )
        if why:
            raise HTTPException(403, why)
        if acting and visitor.mode == "closed":
            self.acting(visitor)
        expected = self.token_for(visitor)
        if not hmac.compare_digest(sent_token.encode("utf-8", "replace"), expected.encode()):
            raise HTTPException(
                403, "the form token is missing or out of date; reload the page and try again"
            )

    @staticmethod
    def acting(visitor: Visitor) -> Principal:
        """The signed-in principal; NotAuthenticated (401) for a visitor who is not signed in."""
        if visitor.principal is None:
            raise NotAuthenticated(
                visitor.refused or "not signed in: sign in at /sign-in with your token to use the forms"
            )
        return visitor.principal

    # -- sessions -------------------------------------------------------------------
    def start_session(self, principal: Principal, response: Response, *, secure: bool) -> None:
        """Record a new session for `principal` and set its cookie on `response`."""
        session_id = self.people.create_session(principal, ttl_seconds=self.session_ttl)
        response.set_cookie(
            SESSION_COOKIE,
            self._signer.sign(session_id).decode(),
            max_age=int(self.session_ttl),
            path="/",
            secure=secure,
            httponly=True,
            samesite="strict",
        )

    def end_session(self, visitor: Visitor, response: Response) -> None:
        if visitor.session_id is not None:
            self.people.end_session(visitor.session_id)
        response.delete_cookie(
            SESSION_COOKIE, path="/", secure=visitor.secure, httponly=True, samesite="strict"
        )


def new_form_token() -> str:
    """A per-process form token for open mode and the sign-in form."""
    return secrets.token_urlsafe(32)


__all__ = ["SESSION_COOKIE", "Visitor", "WebAuth", "new_form_token"]

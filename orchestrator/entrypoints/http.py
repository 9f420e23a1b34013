"""`pressroom serve`: the JSON API and the reviewers' web pages, over the use cases `build_app` assembles.

The API mirrors the CLI contract (DESIGN.md): each route returns the dict the
matching service returns, unchanged.

    GET  /api/sagas?limit=&after=&waiting=   {"sagas": [...], "has_more", "next"}  (status, paged)
    POST /api/sagas                          201, the new saga's status (submit)
         {"brief", "corpus", "destinations": [...], "as", "pipeline"?}; an
         `Idempotency-Key` header makes a retry answer 200 with the saga the first call made
    GET  /api/sagas/{id}                     status
    GET  /api/sagas/{id}/versions/{n}        show
    GET  /api/sagas/{id}/history             history
    GET  /api/sagas/{id}/diff/{n}/{m}        unified diff, text/plain
    POST /api/sagas/{id}/approve             {"version", "as", "expires_in"?}
    POST /api/sagas/{id}/reject              {"as", "reason"}
    POST /api/sagas/{id}/cancel              {"as"}; while executing: `"cancel": "requested"`
    POST /api/sagas/{id}/reconcile           {"destination", "outcome", "as", "reason"}
    POST /api/sagas/{id}/retry               {"as"}: run a failed saga (or a failed undo) again
    POST /api/sagas/{id}/fork                {"version", "as"}: 201, the new saga at ready-for-review
    GET  /api/pipelines                      {"pipelines": [...], "invalid": [...]} (pipelines list)
    GET  /api/pipelines/{name}               pipelines show: 404 unknown, 400 a bad name or file

Errors are `{"error": message, "kind": class name}` with the status from
`http_support.status_for`: InvalidInput (and a body that is not JSON, or not
the expected object) 400, NotAuthenticated 401, NotPermitted 403, NotFound
404, other refusals 409, an unreachable database 503. The pages are in
`web.py`; blocking service calls run in Starlette's threadpool.

Callers (see `orchestrator.people.resolve`): in open mode (no user exists)
the `as` name of a body, unverified. In closed mode every /api route needs
`Authorization: Bearer TOKEN` of an active user (401 otherwise); `as` may be
left out and, when given, must name that user (400); a missing role is 403.

Security, stated plainly: in open mode there is no authentication. Whoever
reaches the port can submit, approve, reject, cancel and reconcile under any
name they type, and a submit reads the corpus folder and writes the
destinations it names as the server's own user. `serve` therefore binds 127.0.0.1 by default
and then accepts only loopback `Host` headers (so a DNS-rebinding page cannot
talk to it). Against cross-site requests from the reviewer's own browser:
API POSTs must be `Content-Type: application/json`, which a page on another
site cannot send without a CORS preflight (no CORS headers are served), and
every form post of the pages must come from this site (Origin or Referer)
and carry the visitor's form token (see `web.py` and `web_auth.py`). In
closed mode the pages need a signed-in session or a trusted proxy's user
(`docs/security.md`). Bind another address only in closed mode or behind
a proxy that authenticates.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
from collections.abc import Iterable
from typing import Any

from sqlalchemy.exc import DBAPIError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from orchestrator import pipeline_catalog
from orchestrator.core.errors import PressroomError
from orchestrator.entrypoints.http_bodies import (
    ApproveBody,
    CancelBody,
    ForkBody,
    ReconcileBody,
    RejectBody,
    RetryBody,
    SubmitBody,
    bearer,
    json_body,
)
from orchestrator.entrypoints.web import pages
from orchestrator.entrypoints.web.auth import WebAuth
from orchestrator.entrypoints.web.http_support import LOOPBACK_HOSTS, Guard, status_for, whole_number
from orchestrator.entrypoints.web.routes import WebPages
from orchestrator.harness.principals import Principal
from orchestrator.people import mode, resolve
from orchestrator.pressroom import Pressroom
from orchestrator.store.outage import unreachable

log = logging.getLogger(__name__)

_HTTP_KINDS = {
    400: "InvalidInput",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
}


class Api:
    """The JSON routes over one `Pressroom`."""

    def __init__(self, app: Pressroom) -> None:
        self.app = app

    async def caller(self, request: Request, claimed: str | None, default: str | None = None) -> Principal:
        """Who is asking: the `as` name in open mode, the bearer token's user in closed mode."""

        def find() -> Principal:
            return resolve(
                self.app.people, token=bearer(request), claimed=claimed, what="as", default=default
            )

        return await run_in_threadpool(find)

    async def reader(self, request: Request) -> None:
        await self.caller(request, None, default="reader")

    def routes(self) -> list[Route]:
        return [
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/api/sagas", self.list_sagas, methods=["GET"]),
            Route("/api/sagas", self.submit, methods=["POST"]),
            Route("/api/sagas/{saga_id}", self.status, methods=["GET"]),
            Route("/api/sagas/{saga_id}/versions/{number:int}", self.show, methods=["GET"]),
            Route("/api/sagas/{saga_id}/history", self.history, methods=["GET"]),
            Route("/api/sagas/{saga_id}/diff/{a:int}/{b:int}", self.diff, methods=["GET"]),
            Route("/api/sagas/{saga_id}/approve", self.approve, methods=["POST"]),
            Route("/api/sagas/{saga_id}/reject", self.reject, methods=["POST"]),
            Route("/api/sagas/{saga_id}/cancel", self.cancel, methods=["POST"]),
            Route("/api/sagas/{saga_id}/reconcile", self.reconcile, methods=["POST"]),
            Route("/api/sagas/{saga_id}/retry", self.retry, methods=["POST"]),
            Route("/api/sagas/{saga_id}/fork", self.fork, methods=["POST"]),
            Route("/api/pipelines", self.pipelines, methods=["GET"]),
            Route("/api/pipelines/{name}", self.pipeline, methods=["GET"]),
        ]

    async def healthz(self, request: Request) -> Response:
        """200 with no token in either mode: the process serves requests (a container's health
        check; it reads no database, so a database outage shows in the API's 503s, not here)."""
        return JSONResponse({"status": "ok"})

    async def list_sagas(self, request: Request) -> Response:
        await self.reader(request)
        q = request.query_params
        raw_limit = q.get("limit")
        limit = whole_number(raw_limit, "limit") if raw_limit is not None else None
        waiting = q.get("waiting", "").lower() in ("1", "true", "yes")

        def call() -> dict[str, Any]:
            return self.app.reads.status(limit=limit, after=q.get("after") or None, waiting=waiting)

        return JSONResponse(await run_in_threadpool(call))

    async def pipelines(self, request: Request) -> Response:
        """Every pipeline; one whose file does not parse is named under `invalid` (still 200:
        the listing itself worked, and the good ones are there)."""
        await self.reader(request)
        return JSONResponse(await run_in_threadpool(pipeline_catalog.listing, self.app.settings))

    async def pipeline(self, request: Request) -> Response:
        await self.reader(request)
        name = request.path_params["name"]
        return JSONResponse(await run_in_threadpool(pipeline_catalog.detail, self.app.settings, name))

    async def status(self, request: Request) -> Response:
        await self.reader(request)
        return JSONResponse(await run_in_threadpool(self.app.reads.status, request.path_params["saga_id"]))

    async def show(self, request: Request) -> Response:
        await self.reader(request)
        p = request.path_params
        return JSONResponse(await run_in_threadpool(self.app.reads.show, p["saga_id"], p["number"]))

    async def history(self, request: Request) -> Response:
        await self.reader(request)
        return JSONResponse(await run_in_threadpool(self.app.reads.history, request.path_params["saga_id"]))

    async def diff(self, request: Request) -> Response:
        await self.reader(request)
        p = request.path_params
        text = await run_in_threadpool(self.app.reads.diff, p["saga_id"], p["a"], p["b"])
        return PlainTextResponse(text)

    async def submit(self, request: Request) -> Response:
        body = await json_body(request, SubmitBody)
        request_id = request.headers.get("idempotency-key")
        who = await self.caller(request, body.actor, default="submitter")

        def call() -> dict[str, Any]:
            return self.app.submissions.submit(
                brief=body.brief,
                corpus=body.corpus,
                destinations=body.destinations,
                actor=who,
                request_id=request_id,
                pipeline=body.pipeline,
            )

        out = await run_in_threadpool(call)
        code = 200 if out.get("replayed") else 201
        return JSONResponse(out, status_code=code, headers={"location": f"/api/sagas/{out['saga_id']}"})

    async def approve(self, request: Request) -> Response:
        body = await json_body(request, ApproveBody)
        who = await self.caller(request, body.actor)
        saga_id = request.path_params["saga_id"]

        def call() -> dict[str, Any]:
            return self.app.reviews.approve(
                saga_id, version=body.version, actor=who, expires_in=body.expires_in
            )

        return JSONResponse(await run_in_threadpool(call))

    async def reject(self, request: Request) -> Response:
        body = await json_body(request, RejectBody)
        who = await self.caller(request, body.actor)
        saga_id = request.path_params["saga_id"]

        def call() -> dict[str, Any]:
            return self.app.reviews.reject(saga_id, actor=who, reason=body.reason)

        return JSONResponse(await run_in_threadpool(call))

    async def cancel(self, request: Request) -> Response:
        body = await json_body(request, CancelBody)
        who = await self.caller(request, body.actor)
        saga_id = request.path_params["saga_id"]

        def call() -> dict[str, Any]:
            return self.app.reviews.cancel(saga_id, actor=who)

        return JSONResponse(await run_in_threadpool(call))

    async def retry(self, request: Request) -> Response:
        body = await json_body(request, RetryBody)
        who = await self.caller(request, body.actor)
        saga_id = request.path_params["saga_id"]

        def call() -> dict[str, Any]:
            return self.app.reviews.retry(saga_id, actor=who)

        return JSONResponse(await run_in_threadpool(call))

    async def fork(self, request: Request) -> Response:
        body = await json_body(request, ForkBody)
        who = await self.caller(request, body.actor)
        saga_id = request.path_params["saga_id"]

        def call() -> dict[str, Any]:
            return self.app.reviews.fork(saga_id, version=body.version, actor=who)

        return JSONResponse(await run_in_threadpool(call), status_code=201)

    async def reconcile(self, request: Request) -> Response:
        body = await json_body(request, ReconcileBody)
        who = await self.caller(request, body.actor)
        saga_id = request.path_params["saga_id"]

        def call() -> dict[str, Any]:
            return self.app.reviews.reconcile(
                saga_id,
                destination=body.destination,
                outcome=body.outcome,
                reason=body.reason,
                actor=who,
            )

        return JSONResponse(await run_in_threadpool(call))


# -- errors: JSON under /api, a page elsewhere --------------------------------------
def _is_api(request: Request) -> bool:
    path = request.url.path
    return path == "/api" or path.startswith("/api/")


def _error_response(request: Request, code: int, message: str, kind: str, headers: Any = None) -> Response:
    if _is_api(request):
        return JSONResponse({"error": message, "kind": kind}, status_code=code, headers=headers)
    return HTMLResponse(pages.error_page(code, message), status_code=code, headers=headers)


async def _on_pressroom_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PressroomError)
    code = status_for(exc)
    if code >= 500:
        log.error("%s on %s %s: %s", type(exc).__name__, request.method, request.url.path, exc)
    return _error_response(request, code, str(exc), type(exc).__name__)


async def _on_database_error(request: Request, exc: Exception) -> Response:
    down = unreachable(exc)
    if down is None:
        raise exc
    return _error_response(request, 503, str(down), type(down).__name__)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = _HTTP_KINDS.get(exc.status_code, "HTTPError")
    return _error_response(request, exc.status_code, str(exc.detail), kind, exc.headers)


def create_app(
    app: Pressroom, *, allowed_hosts: Iterable[str] | None = None, form_token: str | None = None
) -> Starlette:
    """The ASGI application: API and pages over `app`.

    `allowed_hosts` (None: any) limits the `Host` header; `form_token` (None: a
    fresh random one) is what the pages' forms must send back in open mode
    and on the sign-in form.
    """
    auth = WebAuth(
        app.people,
        signing_key=app.signing_key,
        form_token=form_token or secrets.token_urlsafe(32),
        session_ttl=app.settings.session_ttl,
        proxy_header=app.settings.trusted_proxy_header,
        trusted_proxies=app.settings.trusted_proxies,
        clock=app.clock,
    )
    web = WebPages(app, auth)
    return Starlette(
        routes=[*Api(app).routes(), *web.routes()],
        middleware=[Middleware(Guard, allowed_hosts=allowed_hosts)],
        exception_handlers={
            PressroomError: _on_pressroom_error,
            HTTPException: _on_http_error,
            DBAPIError: _on_database_error,
        },
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _mode_line(current: str) -> str:
    if current == "open":
        return (
            "pressroom serve: open mode (no users; names are not verified; `pressroom users add` closes it)"
        )
    return "pressroom serve: closed mode (callers need a user's token or a signed-in session)"


def serve(host: str = "127.0.0.1", port: int = 8080) -> None:
    """Build the app from the environment's Settings, set up tracing, and run uvicorn."""
    import uvicorn

    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings
    from orchestrator.observability import start_tracing
    from telemetry.names import SERVICE_API

    settings = Settings()
    start_tracing(SERVICE_API, settings)
    app = build_app(settings)
    print(_mode_line(mode(app.people)), flush=True)
    allowed: set[str] | None = None
    if is_loopback(host):
        allowed = {*LOOPBACK_HOSTS, host.strip("[]").lower()}
    elif mode(app.people) == "open":
        log.warning("serving on %s without authentication: put an authenticating proxy in front", host)
    # proxy_headers off: the peer address must be the socket's, so that only
    # PRESSROOM_TRUSTED_PROXIES decide whose forwarded headers count (web_auth).
    uvicorn.run(
        create_app(app, allowed_hosts=allowed), host=host, port=port, server_header=False, proxy_headers=False
    )


__all__ = ["Api", "create_app", "is_loopback", "serve"]

"""The workspace routes of the reviewers' pages: the list, the diff, the live stream, the script.

    GET /?view=all|waiting&state=&q=&after=&limit=   the sagas, 25 a page:
        `waiting` is "waiting for my review" (closed mode: the sagas in
        ready-for-review the signed-in reviewer may approve; open mode: all
        of them), the longest waiting first; `all` is every saga, newest
        first. Without `view`, a signed-in person who may approve lands on
        `waiting`, everyone else on `all`. `state` filters, `q` searches id
        prefix, brief and title; `after` is the cursor of the next page
    GET /sagas/{id}/diff?a=N&b=M              side-by-side word diff of any two versions
    GET /sagas/{id}/diff/{n}/{m}              the same
    GET /sagas/{id}/live?since=TOKEN          Server-Sent Events (see `web_live`)
    GET /static/workspace.js                  the saga page's script

Bad query values are 400 (an error page), an unknown saga or version 404.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from orchestrator.core.errors import InvalidInput
from orchestrator.entrypoints.web import live as web_live
from orchestrator.entrypoints.web import pages, workspace
from orchestrator.entrypoints.web.auth import Visitor, WebAuth
from orchestrator.entrypoints.web.http_support import whole_number
from orchestrator.harness.principals import Permission
from orchestrator.pressroom import Pressroom

Reader = Callable[[Request], Awaitable[tuple[Visitor, Response | None]]]


def _number(text: str | None, name: str) -> int:
    value = (text or "").strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 9:
        raise InvalidInput(f"{name} must name a version by its number")
    return int(value)


def _reviews(visitor: Visitor) -> bool:
    """Whether the visitor's landing page is "waiting for my review": a signed-in approver."""
    return visitor.principal is not None and visitor.principal.may(Permission.APPROVE)


class WorkspaceRoutes:
    def __init__(self, app: Pressroom, auth: WebAuth, reader: Reader) -> None:
        self.app = app
        self.auth = auth
        self.reader = reader
        self.hub = web_live.LiveHub(
            lambda saga_ids: {sid: workspace.current_fingerprint(app, sid) for sid in saga_ids},
            per_user=app.settings.live_streams_per_user,
            total=app.settings.live_streams_total,
        )

    def routes(self) -> list[Route]:
        return [
            Route("/", self.index, methods=["GET"]),
            Route("/sagas/{saga_id}/diff", self.pick_diff, methods=["GET"]),
            Route("/sagas/{saga_id}/diff/{a:int}/{b:int}", self.diff, methods=["GET"]),
            Route("/sagas/{saga_id}/live", self.live, methods=["GET"]),
            Route(web_live.SCRIPT_PATH, self.script, methods=["GET"]),
        ]

    async def index(self, request: Request) -> Response:
        visitor, away = await self.reader(request)
        if away:
            return away
        q = request.query_params
        view = q.get("view") or ("waiting" if _reviews(visitor) else "all")
        state = q.get("state") or None
        search = q.get("q") or None
        after = q.get("after") or None
        raw_limit = q.get("limit") or ""
        limit = whole_number(raw_limit, "limit") if raw_limit else workspace.PAGE_SIZE
        if not 1 <= limit <= workspace.MAX_PAGE:
            raise InvalidInput(f"limit must be a whole number from 1 to {workspace.MAX_PAGE}")
        payload = await run_in_threadpool(
            lambda: workspace.load_queue(
                self.app,
                view=view,
                state=state,
                search=search,
                after=after,
                principal=visitor.principal,
                limit=limit,
            )
        )
        filters = {"view": view, "state": state or "", "q": search or "", "limit": raw_limit}
        body = pages.saga_list(
            payload, viewer=self.auth.viewer(visitor), filters=filters, paged=after is not None
        )
        return HTMLResponse(body)

    async def pick_diff(self, request: Request) -> Response:
        q = request.query_params
        return await self._diff(request, _number(q.get("a"), "a"), _number(q.get("b"), "b"))

    async def diff(self, request: Request) -> Response:
        return await self._diff(request, request.path_params["a"], request.path_params["b"])

    async def _diff(self, request: Request, a: int, b: int) -> Response:
        visitor, away = await self.reader(request)
        if away:
            return away
        data = await run_in_threadpool(workspace.load_diff, self.app, request.path_params["saga_id"], a, b)
        return HTMLResponse(pages.diff_page_of(data, viewer=self.auth.viewer(visitor)))

    async def live(self, request: Request) -> Response:
        visitor, away = await self.reader(request)
        if away:
            return web_live.not_signed_in()
        saga_id = request.path_params["saga_id"]
        status = await run_in_threadpool(self.app.reads.status, saga_id)
        sid = status["saga_id"]
        since = request.headers.get("last-event-id") or request.query_params.get("since") or ""

        def still_allowed() -> bool:
            if visitor.mode == "open":
                return True
            return self.auth.visitor(request).signed_in

        if visitor.principal is not None:
            user = f"principal:{visitor.principal.id}"
        else:
            user = f"peer:{request.client.host if request.client else '?'}"
        # Streams of one credential share one sign-in check per poll.
        credential = hashlib.sha256(
            "\0".join(
                request.headers.get(h, "") for h in ("cookie", "authorization", "x-forwarded-user")
            ).encode()
            + user.encode()
        ).hexdigest()
        try:
            watcher = self.hub.open(user, sid, credential, still_allowed, web_live.STREAM_SECONDS)
        except web_live.TooManyStreams as exc:
            return web_live.too_many(str(exc))
        return web_live.stream(request, since[:64], self.hub, watcher)

    async def script(self, request: Request) -> Response:
        return web_live.page_script()


__all__ = ["WorkspaceRoutes"]

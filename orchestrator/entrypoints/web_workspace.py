"""The workspace routes of the reviewers' pages: the list, the diff, the live stream, the script.

    GET /?view=all|waiting&state=&q=&after=&limit=   the sagas, newest first, 25 a page:
        `waiting` is "waiting for my review" (closed mode: the sagas in
        ready-for-review the signed-in reviewer may approve; open mode: all
        of them); `state` filters, `q` searches id prefix, brief and title;
        `after` is the cursor of the next page (as `GET /api/sagas`)
    GET /sagas/{id}/diff?a=N&b=M              side-by-side word diff of any two versions
    GET /sagas/{id}/diff/{n}/{m}              the same
    GET /sagas/{id}/live?since=TOKEN          Server-Sent Events (see `web_live`)
    GET /static/workspace.js                  the saga page's script

Bad query values are 400 (an error page), an unknown saga or version 404.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from orchestrator import services
from orchestrator.app import App
from orchestrator.core.errors import InvalidInput
from orchestrator.entrypoints import pages, web_live, workspace
from orchestrator.entrypoints.web_auth import Visitor, WebAuth

Reader = Callable[[Request], Awaitable[tuple[Visitor, Response | None]]]


def _number(text: str | None, name: str) -> int:
    value = (text or "").strip()
    if not value.isdigit() or len(value) > 9:
        raise InvalidInput(f"{name} must name a version by its number")
    return int(value)


class WorkspaceRoutes:
    def __init__(self, app: App, auth: WebAuth, reader: Reader) -> None:
        self.app = app
        self.auth = auth
        self.reader = reader

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
        view = q.get("view") or "all"
        state = q.get("state") or None
        search = q.get("q") or None
        after = q.get("after") or None
        raw_limit = q.get("limit") or ""
        if raw_limit and (not raw_limit.isdigit() or not 1 <= int(raw_limit) <= workspace.MAX_PAGE):
            raise InvalidInput(f"limit must be a whole number from 1 to {workspace.MAX_PAGE}")
        limit = int(raw_limit) if raw_limit else workspace.PAGE_SIZE
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
        status = await run_in_threadpool(services.status, self.app, saga_id)
        sid = status["saga_id"]
        since = request.headers.get("last-event-id") or request.query_params.get("since") or ""

        def fingerprint() -> str:
            return workspace.current_fingerprint(self.app, sid)

        def still_allowed() -> bool:
            if visitor.mode == "open":
                return True
            return self.auth.visitor(request).signed_in

        return web_live.stream(request, since[:64], fingerprint, still_allowed)

    async def script(self, request: Request) -> Response:
        return web_live.page_script()


__all__ = ["WorkspaceRoutes"]

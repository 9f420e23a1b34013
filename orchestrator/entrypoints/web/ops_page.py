"""The operators' `/ops` page: queues, workers and the sagas stuck longest.

Route: `GET /ops`. In closed mode only a signed-in `operator` sees it (403
for anyone else, a redirect to `/sign-in` for nobody); in open mode anyone
does, as with the operators' forms.

It shows, read when the page is opened:
- per role queue, its depth on the broker and the open work the database
  holds for it (count, oldest age, earliest lease deadline), and the
  outbox's unsent rows (`orchestrator.reads.ops_view`);
- the workers that answer Celery's remote control just now, with pool,
  concurrency, uptime and the tasks they run (`orchestrator.ops_broker`); with
  the inline broker, "in-process (no separate workers)";
- per live state, the sagas unchanged the longest and what each waits on.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from orchestrator import ops_broker
from orchestrator.core.errors import NotPermitted
from orchestrator.core.routing import QUEUES
from orchestrator.entrypoints.web import pages
from orchestrator.entrypoints.web.auth import WebAuth
from orchestrator.entrypoints.web.ops import Pages
from orchestrator.harness.principals import Role
from orchestrator.pressroom import Pressroom
from orchestrator.reads import ops_view


class OpsPage:
    def __init__(self, app: Pressroom, auth: WebAuth, web: Pages) -> None:
        self.app = app
        self.auth = auth
        self.web = web

    def routes(self) -> list[Route]:
        return [Route("/ops", self.page, methods=["GET"])]

    async def page(self, request: Request) -> Response:
        visitor, away = await self.web.reader(request)
        if away:
            return away
        principal = visitor.principal
        if visitor.mode == "closed" and (principal is None or Role.OPERATOR not in principal.roles):
            who = principal.display if principal else "nobody"
            raise NotPermitted(f"{who} may not see the ops page: it needs the role operator")
        now = self.app.clock.now()  # the database's: leases and waits were dated on it
        view = await run_in_threadpool(ops_view.read_ops, self.app.engine, now)
        broker = await run_in_threadpool(ops_broker.read_broker, self.app.broker)
        body = pages.render(
            "ops.html",
            title="Operations",
            viewer=self.auth.viewer(visitor),
            view=view,
            broker=broker,
            queues=QUEUES,
            live_states=ops_view.LIVE_STATES,
            age=lambda moment: ops_view.age_text((now - moment).total_seconds()),
            until=lambda moment: ops_view.age_text((moment - now).total_seconds()),
            seconds=ops_view.age_text,
        )
        return HTMLResponse(body)


__all__ = ["OpsPage"]

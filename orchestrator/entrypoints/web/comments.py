"""Reviewers' line comments from the version's section of the saga page.

Route:

    POST /sagas/{id}/versions/{n}/comments   line, text   comments.leave

The form is checked like the others (origin and form token, `WebPages._form`)
and acts as the signed-in principal in closed mode (who needs the `reviewer`
role: 403 otherwise, from the use case) or the typed name in open mode. Only
the head version takes comments (409 for an older one); a text that is empty
or over 2,000 characters, or a line the version does not have, is 400 with the
page shown again. On success: 303 back to the saga page, at the line.
The comments are shown under their lines by `templates/version.html`.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from orchestrator.core.errors import InvalidInput, NotAuthenticated, NotFound, PressroomError
from orchestrator.entrypoints.web import pages
from orchestrator.entrypoints.web.auth import Visitor, WebAuth
from orchestrator.entrypoints.web.http_support import whole_number
from orchestrator.entrypoints.web.ops import Pages, acting_as
from orchestrator.pressroom import Pressroom


def _line_field(form: dict[str, str]) -> int:
    text = form.get("line", "").strip()
    if not (text.isascii() and text.isdigit()):
        raise InvalidInput("the line to comment on is a number")
    return whole_number(text, "the line")


class CommentRoutes:
    def __init__(self, app: Pressroom, auth: WebAuth, web: Pages) -> None:
        self.app = app
        self.auth = auth
        self.web = web

    def routes(self) -> list[Route]:
        return [Route("/sagas/{saga_id}/versions/{number:int}/comments", self.leave, methods=["POST"])]

    async def leave(self, request: Request) -> Response:
        saga_id, number = request.path_params["saga_id"], request.path_params["number"]
        visitor: Visitor = await run_in_threadpool(self.auth.visitor, request)
        form = await self.web.form(request, visitor)
        try:
            actor = acting_as(visitor, form)
            line = _line_field(form)
            text = form.get("text", "")
            out = await run_in_threadpool(
                lambda: self.app.comments.leave(saga_id, version=number, line=line, text=text, actor=actor)
            )
        except (NotFound, NotAuthenticated):
            raise
        except PressroomError as exc:
            return await self.web.refused(visitor, saga_id, exc, form)
        target = pages.saga_href(out["saga_id"]) + f"#line-{out['line']}"
        return RedirectResponse(target, status_code=303)


__all__ = ["CommentRoutes"]

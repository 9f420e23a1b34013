"""The operators' forms on the saga page: cancel, retry, fork, reconcile and takedown.

Routes:

    POST /sagas/{id}/cancel                    reviews.cancel
    POST /sagas/{id}/retry                     reviews.retry
    POST /sagas/{id}/fork       fork_version   reviews.fork
    GET  /sagas/{id}/reconcile                 each unsettled destination, what its status
                                               says now (asked through the tool path's
                                               read-only `publish.status`, as the visitor,
                                               each question an event naming them), and a
                                               form per destination
    POST /sagas/{id}/reconcile  dest, outcome, reason
                                               reviews.reconcile, as the CLI's `reconcile`
    POST /sagas/{id}/takedown   dest, reason   operations.takedown, as the CLI's `takedown`
                                               (a form per published destination of a
                                               succeeded saga)

Each form is checked like the others (origin and form token, `WebPages._form`)
and acts as the signed-in principal in closed mode (a typed, unverified name in
open mode); a role without the permission is 403, from the services. Which
buttons the saga page shows is `web_actions.operator_actions` (the state) and
`Viewer.holds("operator")` (the person). The reconcile page asks the
destinations only when it is opened, never on the saga page's live refresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from orchestrator.core.errors import InvalidInput, NotAuthenticated, NotFound, PressroomError
from orchestrator.entrypoints.web import pages
from orchestrator.entrypoints.web.auth import Visitor, WebAuth
from orchestrator.entrypoints.web.http_support import status_for, whole_number
from orchestrator.entrypoints.web.rules import problem
from orchestrator.harness.principals import Principal
from orchestrator.people import check_claim
from orchestrator.pressroom import Pressroom

# Who asks the destinations' status from the reconcile page in open mode (no one signs in).
OPEN_MODE_VISITOR = "web visitor (open mode)"


class Pages(Protocol):
    """What these routes use of `web.WebPages`."""

    async def reader(self, request: Request) -> tuple[Visitor, Response | None]: ...

    async def form(self, request: Request, visitor: Visitor) -> dict[str, str]: ...

    async def refused(
        self, visitor: Visitor, saga_id: str, error: PressroomError, form: dict[str, str]
    ) -> Response: ...


def acting_as(visitor: Visitor, form: dict[str, str]) -> Principal | str:
    """Who acts: the signed-in principal (closed mode) or the typed name (open mode)."""
    if visitor.mode == "open":
        return form.get("name", "")
    principal = WebAuth.acting(visitor)
    if form.get("name", "").strip():
        check_claim(principal, form["name"], "name")
    return principal


def _done(saga_id: str, what: str) -> Response:
    return RedirectResponse(pages.saga_href(saga_id) + f"?done={what}", status_code=303)


class OperatorRoutes:
    def __init__(self, app: Pressroom, auth: WebAuth, web: Pages) -> None:
        self.app = app
        self.auth = auth
        self.web = web

    def routes(self) -> list[Route]:
        return [
            Route("/sagas/{saga_id}/cancel", self.cancel, methods=["POST"]),
            Route("/sagas/{saga_id}/retry", self.retry, methods=["POST"]),
            Route("/sagas/{saga_id}/fork", self.fork, methods=["POST"]),
            Route("/sagas/{saga_id}/reconcile", self.reconcile_page, methods=["GET"]),
            Route("/sagas/{saga_id}/reconcile", self.reconcile, methods=["POST"]),
            Route("/sagas/{saga_id}/takedown", self.takedown, methods=["POST"]),
        ]

    async def _act(
        self,
        request: Request,
        use: Callable[[Principal | str, dict[str, str]], dict[str, Any]],
        then: Callable[[dict[str, Any]], str],
    ) -> Response:
        """Run one operator's form: back to the saga page with `then(answer)`'s notice,
        or the page again with the refusal."""
        saga_id = request.path_params["saga_id"]
        visitor = await self._visitor(request)
        form = await self.web.form(request, visitor)
        try:
            actor = acting_as(visitor, form)
            out = await run_in_threadpool(use, actor, form)
        except (NotFound, NotAuthenticated):
            raise
        except PressroomError as exc:
            return await self.web.refused(visitor, saga_id, exc, form)
        return _done(out["saga_id"], then(out))

    async def _visitor(self, request: Request) -> Visitor:
        return await run_in_threadpool(self.auth.visitor, request)

    async def cancel(self, request: Request) -> Response:
        sid = request.path_params["saga_id"]
        return await self._act(
            request,
            lambda who, _: self.app.reviews.cancel(sid, actor=who),
            lambda out: "cancel-requested" if out.get("cancel") == "requested" else "cancelled",
        )

    async def retry(self, request: Request) -> Response:
        sid = request.path_params["saga_id"]
        return await self._act(
            request, lambda who, _: self.app.reviews.retry(sid, actor=who), lambda _: "retried"
        )

    async def fork(self, request: Request) -> Response:
        sid = request.path_params["saga_id"]

        def use(who: Principal | str, form: dict[str, str]) -> dict[str, Any]:
            version = form.get("fork_version", "").strip()
            if not (version.isascii() and version.isdigit()):
                raise InvalidInput("the version to fork is a number")
            number = whole_number(version, "the version to fork")
            return self.app.reviews.fork(sid, version=number, actor=who)

        return await self._act(request, use, lambda _: "forked")

    async def takedown(self, request: Request) -> Response:
        sid = request.path_params["saga_id"]

        def use(who: Principal | str, form: dict[str, str]) -> dict[str, Any]:
            destination = form.get("dest", "").strip()
            if not destination:
                raise InvalidInput("the form names no destination; reload the page")
            return self.app.operations.takedown(
                sid, destination=destination, reason=form.get("reason", ""), actor=who
            )

        return await self._act(request, use, lambda _: "taken-down")

    # -- reconcile -----------------------------------------------------------
    async def reconcile_page(self, request: Request) -> Response:
        visitor, away = await self.web.reader(request)
        if away:
            return away
        return await self._reconcile_page(visitor, request.path_params["saga_id"])

    async def _reconcile_page(
        self,
        visitor: Visitor,
        saga_id: str,
        *,
        error: PressroomError | None = None,
        values: dict[str, str] | None = None,
    ) -> Response:
        asker: Principal | str = OPEN_MODE_VISITOR if visitor.mode == "open" else WebAuth.acting(visitor)

        def load() -> tuple[dict[str, Any], dict[str, Any]]:
            status = self.app.reads.status(saga_id)
            return status, self.app.operations.ask_unsettled(status["saga_id"], actor=asker)

        status, asked = await run_in_threadpool(load)
        body = pages.render(
            "reconcile.html",
            title=f"Reconcile {status.get('title') or status['saga_id']}",
            viewer=self.auth.viewer(visitor),
            status=status,
            asked=asked["destinations"],
            token=self.auth.token_for(visitor),
            error=f"{problem(error)}: {error}" if error is not None else None,
            values=values or {},
        )
        return HTMLResponse(body, status_code=status_for(error) if error is not None else 200)

    async def reconcile(self, request: Request) -> Response:
        saga_id = request.path_params["saga_id"]
        visitor = await self._visitor(request)
        form = await self.web.form(request, visitor)
        try:
            actor = acting_as(visitor, form)
            destination = form.get("dest", "").strip()
            if not destination:
                raise InvalidInput("the form names no destination; reload the page")
            outcome, reason = form.get("outcome", ""), form.get("reason", "")
            out = await run_in_threadpool(
                lambda: self.app.reviews.reconcile(
                    saga_id, destination=destination, outcome=outcome, actor=actor, reason=reason
                )
            )
        except (NotFound, NotAuthenticated):
            raise
        except PressroomError as exc:
            kept: dict[str, str] = {k: form[k] for k in ("dest", "outcome", "reason", "name") if k in form}
            return await self._reconcile_page(visitor, saga_id, error=exc, values=kept)
        return _done(out["saga_id"], "reconciled")


__all__ = ["OPEN_MODE_VISITOR", "OperatorRoutes", "Pages", "acting_as"]

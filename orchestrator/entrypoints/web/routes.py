"""The reviewers' web pages: read through the use cases, render with `pages`.

Routes: `GET /sagas/{id}` (the reviewer's workspace: status, destinations,
the head version's body with each `[n]` marker opening its quote in the
source's surrounding lines and the review's findings drawn on the sentences
they are about, the versions with author, verdict and digest and a picker to
diff any two, the timeline, the history, and the approve, reject, edit and
cancel forms, each shown to the roles that may use it; it follows the saga
live, see `web_live`), `GET /sagas/{id}/versions/{n}`, the list, the diff and
the live stream (`web_workspace`), `POST /sagas/{id}/approve`,
`POST /sagas/{id}/reject`, `POST /sagas/{id}/edit` (a new version from the
form's markdown), the operators' cancel, retry, fork and reconcile
(`web_ops`), the operators' `GET /ops` (`web_ops_page`), and sign-in: `GET|POST /sign-in`, `POST /sign-out`.
A form that succeeds answers 303 back to the saga page; one that is refused
shows the page again with the error and the status of the error table
(400, 403, 404, 409).

The approve form carries the number of the version rendered above it as a
hidden field, so approving binds the version the reviewer read:
`Reviews.approve` refuses any other one (`StaleVersion`).
When that version's automated review has findings, the form has one `ack`
checkbox per finding (`findings.finding_id`); `Reviews.approve` refuses the
approval (400) unless every finding is ticked, and records them.

Who acts (see `web_auth`): in open mode (no user exists) the name typed in
the form, recorded as unverified, as before people existed. In closed mode
the signed-in principal, handed to the services as a `Principal` (the forms
have no name field); a visitor who is not signed in is sent to `/sign-in`
by the pages and answered 401 by the forms, and a role without the
permission is 403 (from the services).

Cross-site forms: every POST must come from this site (`Origin`, or
`Referer`; required in closed mode) and carry the visitor's form token
(hidden field `form_token`): bound to the session in closed mode, random per
server process in open mode and on the sign-in form, compared in constant
time. Otherwise 403. A form loaded before a server restart (open mode) or
before signing in again (closed mode) is refused; reload the page.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from orchestrator.core.errors import InvalidInput, NotAuthenticated, NotFound, PressroomError
from orchestrator.entrypoints.web import live as web_live
from orchestrator.entrypoints.web import pages, workspace
from orchestrator.entrypoints.web import rules as web_rules
from orchestrator.entrypoints.web.auth import Visitor, WebAuth
from orchestrator.entrypoints.web.comments import CommentRoutes
from orchestrator.entrypoints.web.http_support import media_type, read_body, status_for, whole_number
from orchestrator.entrypoints.web.ops import OperatorRoutes, acting_as
from orchestrator.entrypoints.web.ops_page import OpsPage
from orchestrator.entrypoints.web.rules import problem
from orchestrator.entrypoints.web.workspace_routes import WorkspaceRoutes
from orchestrator.harness.principals import Principal
from orchestrator.pressroom import Pressroom

MAX_FORM_BYTES = 64 * 1024
MAX_EDIT_BYTES = 1024 * 1024  # an edit carries a whole document
MAX_FORM_FIELDS = 20
MAX_ACKS = 500  # the approve form's ticks, one per review finding

NOTICES = {
    "approved": "Approval recorded for the version shown; publishing follows. The destinations show the outcome.",
    "rejected": "Rejected: the writer revises this version with your reason (it removes the sentences "
    "whose citations you named); if it could not act on it, the saga says so.",
    "taken-down": "Taken down: the destination's page was undone, and the step is compensated.",
    "edited": "Saved as a new version; the automated review runs again before it can be approved.",
    "cancelled": "Cancelled: nothing more is published, and what was published is compensated.",
    "cancel-requested": "Cancel requested: the saga stops before its next step, then undoes what it published.",
    "retried": "Retried: the saga runs again from its last good point, with the same keys.",
    "forked": "Forked: this new saga holds the chosen version's bytes and waits for a reviewer.",
    "reconciled": "Reconciled: the step is settled as you said, and the saga carries on.",
}

# The fields a refused form is shown again with (never the token).
_ECHOED_FIELDS = ("name", "expires_in", "reason", "markdown", "fork_version")

SagaData = tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]


def load_saga(app: Pressroom, saga_id: str, number: int | None, with_history: bool) -> SagaData:
    """Status, the version to show (head when `number` is None) and the history."""
    status = app.reads.status(saga_id)
    sid = status["saga_id"]
    version = None
    if number is not None:
        version = app.reads.show(sid, number)
    elif status.get("version"):
        version = app.reads.show(sid)
    history = app.reads.history(sid) if with_history else None
    return status, version, history


def _version_field(form: dict[str, str]) -> int:
    text = form.get("version", "").strip()
    if not text.isdigit():
        raise InvalidInput("the form names no version to approve; reload the page")
    return whole_number(text, "the version")


def _edit_text(app: Pressroom, saga_id: str, markdown: str, actor: Principal | str) -> dict[str, Any]:
    """`Reviews.edit` takes a file, as the CLI does: hand it the form's text in a private one."""
    with tempfile.TemporaryDirectory(prefix="pressroom-edit-") as folder:
        path = Path(folder) / "version.md"
        path.write_text(markdown, encoding="utf-8")
        return app.reviews.edit(saga_id, path=str(path), actor=actor)


class WebPages:
    """The page routes over one `Pressroom`, with the sign-in that says who is visiting."""

    def __init__(self, app: Pressroom, auth: WebAuth) -> None:
        self.app = app
        self.auth = auth

    def routes(self) -> list[Route]:
        return [
            *WorkspaceRoutes(self.app, self.auth, self._reader).routes(),
            *OperatorRoutes(self.app, self.auth, self).routes(),
            *CommentRoutes(self.app, self.auth, self).routes(),
            *OpsPage(self.app, self.auth, self).routes(),
            Route("/sagas/{saga_id}", self.saga, methods=["GET"]),
            Route("/sagas/{saga_id}/versions/{number:int}", self.version, methods=["GET"]),
            Route("/sagas/{saga_id}/approve", self.approve, methods=["POST"]),
            Route("/sagas/{saga_id}/reject", self.reject, methods=["POST"]),
            Route("/sagas/{saga_id}/edit", self.edit, methods=["POST"]),
            Route("/sign-in", self.sign_in_page, methods=["GET"]),
            Route("/sign-in", self.sign_in, methods=["POST"]),
            Route("/sign-out", self.sign_out, methods=["POST"]),
        ]

    async def _visitor(self, request: Request) -> Visitor:
        return await run_in_threadpool(self.auth.visitor, request)

    async def _reader(self, request: Request) -> tuple[Visitor, Response | None]:
        """The visitor, and a redirect to sign-in when closed mode has nobody signed in."""
        visitor = await self._visitor(request)
        if visitor.mode == "closed" and not visitor.signed_in:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return visitor, RedirectResponse("/sign-in?next=" + quote(target, safe=""), status_code=303)
        return visitor, None

    # -- reading -----------------------------------------------------------
    async def saga(self, request: Request) -> Response:
        visitor, away = await self._reader(request)
        if away:
            return away
        notice = NOTICES.get(request.query_params.get("done", ""))
        return await self._saga_page(visitor, request.path_params["saga_id"], notice=notice)

    async def version(self, request: Request) -> Response:
        visitor, away = await self._reader(request)
        if away:
            return away
        p = request.path_params
        data = await run_in_threadpool(
            lambda: workspace.load_workspace(self.app, p["saga_id"], p["number"], with_history=False)
        )
        body = pages.saga_page(
            data["status"],
            data["version"],
            None,
            token=self.auth.token_for(visitor),
            viewer=self.auth.viewer(visitor),
            workspace=data["workspace"],
        )
        return HTMLResponse(body)

    async def _saga_page(
        self,
        visitor: Visitor,
        saga_id: str,
        *,
        notice: str | None = None,
        error: PressroomError | None = None,
        values: dict[str, str] | None = None,
    ) -> Response:
        data = await run_in_threadpool(workspace.load_workspace, self.app, saga_id)
        nonce = web_live.new_nonce()
        body = pages.saga_page(
            data["status"],
            data["version"],
            data["history"],
            token=self.auth.token_for(visitor),
            notice=notice,
            error=f"{problem(error)}: {error}" if error is not None else None,
            values=values,
            viewer=self.auth.viewer(visitor),
            workspace=data["workspace"],
            nonce=nonce,
            trace_url=self.app.settings.trace_url,
        )
        return HTMLResponse(
            body,
            status_code=status_for(error) if error is not None else 200,
            headers={"content-security-policy": web_live.script_policy(nonce)},
        )

    # -- deciding ----------------------------------------------------------
    async def approve(self, request: Request) -> Response:
        saga_id = request.path_params["saga_id"]
        visitor = await self._visitor(request)
        pairs = await self._pairs(request, visitor, fields=MAX_FORM_FIELDS + MAX_ACKS)
        form: dict[str, str] = {}
        for key, value in pairs:
            form.setdefault(key, value)
        # The findings the reviewer ticked as read: all of the version's must be (`Reviews.approve`).
        ticked = [value for key, value in pairs if key == "ack"]
        try:
            actor = acting_as(visitor, form)
            version = _version_field(form)
            expires_in = (form.get("expires_in") or "").strip() or None
            out = await run_in_threadpool(
                lambda: self.app.reviews.approve(
                    saga_id,
                    version=version,
                    actor=actor,
                    expires_in=expires_in,
                    acknowledged=ticked,
                )
            )
        except (NotFound, NotAuthenticated):
            raise
        except PressroomError as exc:
            return await self._refused(visitor, saga_id, exc, form)
        return RedirectResponse(pages.saga_href(out["saga_id"]) + "?done=approved", status_code=303)

    async def reject(self, request: Request) -> Response:
        saga_id = request.path_params["saga_id"]
        visitor = await self._visitor(request)
        form = await self._form(request, visitor)
        try:
            actor = acting_as(visitor, form)
            reason = form.get("reason", "")
            out = await run_in_threadpool(
                lambda: self.app.reviews.reject(saga_id, actor=actor, reason=reason)
            )
        except (NotFound, NotAuthenticated):
            raise
        except PressroomError as exc:
            return await self._refused(visitor, saga_id, exc, form)
        return RedirectResponse(pages.saga_href(out["saga_id"]) + "?done=rejected", status_code=303)

    async def edit(self, request: Request) -> Response:
        saga_id = request.path_params["saga_id"]
        visitor = await self._visitor(request)
        form = await self._form(request, visitor, limit=MAX_EDIT_BYTES)
        try:
            actor = acting_as(visitor, form)
            # A browser sends a textarea's line breaks as CRLF; the document keeps LF.
            markdown = form.get("markdown", "").replace("\r\n", "\n")
            if not markdown.strip():
                raise InvalidInput("the markdown is empty")
            out = await run_in_threadpool(_edit_text, self.app, saga_id, markdown, actor)
        except (NotFound, NotAuthenticated):
            raise
        except PressroomError as exc:
            return await self._refused(visitor, saga_id, exc, form)
        return RedirectResponse(pages.saga_href(out["saga_id"]) + "?done=edited", status_code=303)

    async def reader(self, request: Request) -> tuple[Visitor, Response | None]:
        return await self._reader(request)

    async def form(self, request: Request, visitor: Visitor) -> dict[str, str]:
        return await self._form(request, visitor)

    async def refused(
        self, visitor: Visitor, saga_id: str, error: PressroomError, form: dict[str, str]
    ) -> Response:
        return await self._refused(visitor, saga_id, error, form)

    async def _refused(
        self, visitor: Visitor, saga_id: str, error: PressroomError, form: dict[str, str]
    ) -> Response:
        values = {k: form[k] for k in _ECHOED_FIELDS if k in form}
        return await self._saga_page(visitor, saga_id, error=error, values=values)

    # -- signing in and out ------------------------------------------------
    async def sign_in_page(self, request: Request) -> Response:
        visitor = await self._visitor(request)
        return self._sign_in_form(visitor, next_path=request.query_params.get("next"))

    def _sign_in_form(
        self, visitor: Visitor, *, next_path: str | None, error: str | None = None, status_code: int = 200
    ) -> Response:
        body = pages.render(
            "sign_in.html",
            title="Sign in",
            viewer=self.auth.viewer(visitor),
            token=self.auth.token_for(visitor),
            next_path=web_rules.safe_next(next_path),
            error=error or visitor.refused,
        )
        return HTMLResponse(body, status_code=status_code)

    async def sign_in(self, request: Request) -> Response:
        visitor = await self._visitor(request)
        form = await self._form(request, visitor, acting=False)
        next_path = web_rules.safe_next(form.get("next"))
        if visitor.mode == "open":
            raise InvalidInput("open mode: no user exists yet, so there is no one to sign in as")
        principal = await run_in_threadpool(self.auth.people.authenticate, form.get("token", "").strip())
        if principal is None:
            why = "the token is unknown or revoked; ask an admin for a new one (pressroom users token NAME)"
            return self._sign_in_form(visitor, next_path=next_path, error=why, status_code=401)
        answer = RedirectResponse(next_path, status_code=303)
        if visitor.session_id is not None:  # signing in again replaces the old session
            await run_in_threadpool(self.auth.people.end_session, visitor.session_id)
        await run_in_threadpool(self.auth.start_session, principal, answer, secure=visitor.secure)
        return answer

    async def sign_out(self, request: Request) -> Response:
        visitor = await self._visitor(request)
        if visitor.signed_in:  # a visitor already signed out only loses a dead cookie
            await self._form(request, visitor, acting=False)
        answer = RedirectResponse("/sign-in", status_code=303)
        await run_in_threadpool(self.auth.end_session, visitor, answer)
        return answer

    # -- forms -------------------------------------------------------------
    async def _form(
        self, request: Request, visitor: Visitor, *, acting: bool = True, limit: int = MAX_FORM_BYTES
    ) -> dict[str, str]:
        """The url-encoded form, after its origin and token are checked (403 otherwise;
        401 for a form that acts when nobody is signed in). A field sent twice keeps its first value."""
        form: dict[str, str] = {}
        for key, value in await self._pairs(request, visitor, acting=acting, limit=limit):
            form.setdefault(key, value)
        return form

    async def _pairs(
        self,
        request: Request,
        visitor: Visitor,
        *,
        acting: bool = True,
        limit: int = MAX_FORM_BYTES,
        fields: int = MAX_FORM_FIELDS,
    ) -> list[tuple[str, str]]:
        """Every (name, value) of the form, in order, once its origin and token are checked."""
        if media_type(request) != "application/x-www-form-urlencoded":
            raise HTTPException(415, "forms must be sent as application/x-www-form-urlencoded")
        body = await read_body(request, limit)
        try:
            pairs = parse_qsl(
                body.decode("utf-8"),
                keep_blank_values=True,
                max_num_fields=fields,
                strict_parsing=False,
            )
        except ValueError:  # also UnicodeDecodeError, and too many fields
            raise InvalidInput("the form could not be read") from None
        token = next((value for key, value in pairs if key == pages.FORM_TOKEN_FIELD), "")
        self.auth.check_post(request, visitor, token, acting=acting)
        return pairs


__all__ = ["MAX_EDIT_BYTES", "MAX_FORM_BYTES", "NOTICES", "WebPages", "load_saga"]

"""The reviewers' web pages: read through `orchestrator.services`, render with `pages`.

Routes: `GET /` (every saga), `GET /sagas/{id}` (status, destinations, the
head version with its citations, review and flagged sources, the versions,
the history, and the approve and reject forms), `GET /sagas/{id}/versions/{n}`,
`GET /sagas/{id}/diff/{n}/{m}`, `POST /sagas/{id}/approve` and
`POST /sagas/{id}/reject`. A form that succeeds answers 303 back to the saga
page; one that is refused shows the page again with the error and the
status of the error table (400, 404, 409).

The approve form carries the number of the version rendered above it as a
hidden field, so approving binds the version the reviewer read:
`services.approve` refuses any other one (`StaleVersion`).

Cross-site forms: every form carries a form token (hidden field
`form_token`), random per server process and compared in constant time
(`hmac.compare_digest`). A page on another site cannot read ours, so it
cannot learn the token, and its POST is refused with 403. The token changes
when the server restarts: a form loaded before a restart is refused; reload
the page. This is not authentication: anyone who can load the pages can use
the forms, under any name.
"""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from orchestrator import services
from orchestrator.app import App
from orchestrator.entrypoints import pages
from orchestrator.entrypoints.http_support import media_type, read_body, status_for
from orchestrator.errors import InvalidInput, NotFound, PressroomError

MAX_FORM_BYTES = 64 * 1024
MAX_FORM_FIELDS = 20

NOTICES = {
    "approved": "Approval recorded for the version shown; publishing follows. The destinations show the outcome.",
    "rejected": "Rejected: the writer is preparing a new version with your reason.",
}

# The fields a refused form is shown again with (never the token).
_ECHOED_FIELDS = ("name", "expires_in", "reason")

SagaData = tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]


def load_saga(app: App, saga_id: str, number: int | None, with_history: bool) -> SagaData:
    """Status, the version to show (head when `number` is None) and the history."""
    status = services.status(app, saga_id)
    sid = status["saga_id"]
    version = None
    if number is not None:
        version = services.show(app, sid, number)
    elif status.get("version"):
        version = services.show(app, sid)
    history = services.history(app, sid) if with_history else None
    return status, version, history


def _version_field(form: dict[str, str]) -> int:
    text = form.get("version", "").strip()
    if not text.isdigit():
        raise InvalidInput("the form names no version to approve; reload the page")
    return int(text)


class WebPages:
    """The page routes over one `App`, with this process's form token."""

    def __init__(self, app: App, form_token: str) -> None:
        self.app = app
        self.form_token = form_token

    def routes(self) -> list[Route]:
        return [
            Route("/", self.index, methods=["GET"]),
            Route("/sagas/{saga_id}", self.saga, methods=["GET"]),
            Route("/sagas/{saga_id}/versions/{number:int}", self.version, methods=["GET"]),
            Route("/sagas/{saga_id}/diff/{a:int}/{b:int}", self.diff, methods=["GET"]),
            Route("/sagas/{saga_id}/approve", self.approve, methods=["POST"]),
            Route("/sagas/{saga_id}/reject", self.reject, methods=["POST"]),
        ]

    # -- reading -----------------------------------------------------------
    async def index(self, request: Request) -> Response:
        payload = await run_in_threadpool(services.status, self.app)
        return HTMLResponse(pages.saga_list(payload))

    async def saga(self, request: Request) -> Response:
        notice = NOTICES.get(request.query_params.get("done", ""))
        return await self._saga_page(request.path_params["saga_id"], notice=notice)

    async def version(self, request: Request) -> Response:
        status, version, _ = await run_in_threadpool(
            load_saga, self.app, request.path_params["saga_id"], request.path_params["number"], False
        )
        return HTMLResponse(pages.saga_page(status, version, None, token=self.form_token))

    async def diff(self, request: Request) -> Response:
        a, b = request.path_params["a"], request.path_params["b"]
        status = await run_in_threadpool(services.status, self.app, request.path_params["saga_id"])
        text = await run_in_threadpool(services.diff, self.app, status["saga_id"], a, b)
        return HTMLResponse(pages.diff_page(status["saga_id"], a, b, text))

    async def _saga_page(
        self,
        saga_id: str,
        *,
        notice: str | None = None,
        error: PressroomError | None = None,
        values: dict[str, str] | None = None,
    ) -> Response:
        status, version, history = await run_in_threadpool(load_saga, self.app, saga_id, None, True)
        shown_error = f"{type(error).__name__}: {error}" if error is not None else None
        body = pages.saga_page(
            status, version, history, token=self.form_token, notice=notice, error=shown_error, values=values
        )
        return HTMLResponse(body, status_code=status_for(error) if error is not None else 200)

    # -- deciding ----------------------------------------------------------
    async def approve(self, request: Request) -> Response:
        saga_id = request.path_params["saga_id"]
        form = await self._form(request)
        try:
            out = await run_in_threadpool(
                _approve,
                self.app,
                saga_id,
                _version_field(form),
                form.get("name", ""),
                form.get("expires_in"),
            )
        except NotFound:
            raise
        except PressroomError as exc:
            return await self._refused(saga_id, exc, form)
        return RedirectResponse(pages.saga_href(out["saga_id"]) + "?done=approved", status_code=303)

    async def reject(self, request: Request) -> Response:
        saga_id = request.path_params["saga_id"]
        form = await self._form(request)
        try:
            out = await run_in_threadpool(
                _reject, self.app, saga_id, form.get("name", ""), form.get("reason", "")
            )
        except NotFound:
            raise
        except PressroomError as exc:
            return await self._refused(saga_id, exc, form)
        return RedirectResponse(pages.saga_href(out["saga_id"]) + "?done=rejected", status_code=303)

    async def _refused(self, saga_id: str, error: PressroomError, form: dict[str, str]) -> Response:
        values = {k: form[k] for k in _ECHOED_FIELDS if k in form}
        return await self._saga_page(saga_id, error=error, values=values)

    async def _form(self, request: Request) -> dict[str, str]:
        """The url-encoded form, after its token is checked (403 without the right one)."""
        if media_type(request) != "application/x-www-form-urlencoded":
            raise HTTPException(415, "forms must be sent as application/x-www-form-urlencoded")
        body = await read_body(request, MAX_FORM_BYTES)
        try:
            pairs = parse_qsl(
                body.decode("utf-8"),
                keep_blank_values=True,
                max_num_fields=MAX_FORM_FIELDS,
                strict_parsing=False,
            )
        except ValueError:  # also UnicodeDecodeError, and too many fields
            raise InvalidInput("the form could not be read") from None
        form: dict[str, str] = {}
        for key, value in pairs:
            form.setdefault(key, value)
        sent = form.get(pages.FORM_TOKEN_FIELD, "")
        if not hmac.compare_digest(sent.encode(), self.form_token.encode()):
            raise HTTPException(
                403, "the form token is missing or out of date; reload the page and try again"
            )
        return form


def _approve(app: App, saga_id: str, version: int, name: str, expires_in: str | None) -> dict[str, Any]:
    return services.approve(
        app, saga_id, version=version, actor=name, expires_in=(expires_in or "").strip() or None
    )


def _reject(app: App, saga_id: str, name: str, reason: str) -> dict[str, Any]:
    return services.reject(app, saga_id, actor=name, reason=reason)


__all__ = ["MAX_FORM_BYTES", "NOTICES", "WebPages", "load_saga"]

"""The HTTP API's request bodies and how they are read: strict JSON, unknown fields refused.

A body that is not a JSON object of the expected shape is `InvalidInput`
(400) with one line saying what is wrong; a typo in a field name is refused,
not ignored. An integer too long for Python to convert is bad input like any
other, and a version number is at most `MAX_WHOLE` (2**31 - 1).
"""

from __future__ import annotations

from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request

from orchestrator.core.errors import InvalidInput
from orchestrator.entrypoints.web.http_support import MAX_WHOLE, media_type, read_body
from orchestrator.harness.parse import ParseRefused, strict_loads

MAX_JSON_BYTES = 256 * 1024
MAX_JSON_DEPTH = 16
Version = Annotated[StrictInt, Field(ge=0, le=MAX_WHOLE)]


# -- request bodies (unknown fields are refused, so a typo is not ignored) --------
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SubmitBody(_Body):
    brief: StrictStr
    corpus: StrictStr
    destinations: list[StrictStr]
    actor: StrictStr | None = Field(default=None, alias="as")
    pipeline: StrictStr | None = None


class ApproveBody(_Body):
    version: Version
    actor: StrictStr | None = Field(default=None, alias="as")
    expires_in: StrictStr | None = None


class RejectBody(_Body):
    actor: StrictStr | None = Field(default=None, alias="as")
    reason: StrictStr


class CancelBody(_Body):
    actor: StrictStr | None = Field(default=None, alias="as")


class RetryBody(_Body):
    actor: StrictStr | None = Field(default=None, alias="as")


class ForkBody(_Body):
    version: Version
    actor: StrictStr | None = Field(default=None, alias="as")


class ReconcileBody(_Body):
    destination: StrictStr
    outcome: StrictStr
    actor: StrictStr | None = Field(default=None, alias="as")
    reason: StrictStr


B = TypeVar("B", bound=_Body)


def _explain(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in error["loc"]) or "body"
        parts.append(f"{where}: {error['msg']}")
    return "invalid request body: " + "; ".join(parts)


async def json_body(request: Request, model: type[B]) -> B:
    """The request's JSON object as `model`; InvalidInput (400) when it is not one."""
    if media_type(request) != "application/json":
        raise HTTPException(415, "send the request body as Content-Type: application/json")
    raw = await read_body(request, MAX_JSON_BYTES)
    try:
        data = strict_loads(raw.decode("utf-8"), MAX_JSON_DEPTH)
    except UnicodeDecodeError:
        raise InvalidInput("the request body is not UTF-8 text") from None
    except ParseRefused as exc:  # bad JSON, too deep, or a key named twice
        raise InvalidInput(f"the request body is refused: {exc}") from None
    except ValueError:  # json's int() past Python's digit limit: not a ParseRefused
        raise InvalidInput("the request body is refused: it holds an integer with too many digits") from None
    if not isinstance(data, dict):
        raise InvalidInput("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(_explain(exc)) from None


def bearer(request: Request) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header, if there is one."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


__all__ = [
    "ApproveBody",
    "CancelBody",
    "ForkBody",
    "ReconcileBody",
    "RejectBody",
    "RetryBody",
    "SubmitBody",
    "bearer",
    "json_body",
]

"""`submit --request-id ID`: the same request twice gives the same saga, never two.

The request row commits with the saga it made. A retry finds it and answers
with that saga; the same id with other arguments is refused as a conflict,
like a business key reused with a different argument digest (invariant 3).
"""

from __future__ import annotations

import hashlib
import json

from sqlmodel import Session

from orchestrator.core.errors import IdempotencyConflict, InvalidInput
from orchestrator.store.ops_tables import SubmitRequestRow

MAX_REQUEST_ID = 200


def check_request_id(request_id: str) -> str:
    value = request_id.strip()
    if not value or len(value) > MAX_REQUEST_ID or not value.isprintable():
        raise InvalidInput(f"a request id is 1-{MAX_REQUEST_ID} printable characters")
    return value


def args_digest(
    *, brief: str, corpus: str, destinations: list[str], actor: str, pipeline: str = "default"
) -> str:
    """The digest a request id is bound to. The pipeline counts only when it is not the
    default, so a request recorded before pipelines existed still matches its retry."""
    args = {"brief": brief, "corpus": corpus, "destinations": destinations, "actor": actor}
    if pipeline != "default":
        args["pipeline"] = pipeline
    canonical = json.dumps(args, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def find(session: Session, request_id: str, digest: str) -> str | None:
    """The saga a request id made, or None; a conflict when the arguments differ."""
    row = session.get(SubmitRequestRow, request_id)
    if row is None:
        return None
    if row.args_digest != digest:
        raise IdempotencyConflict(
            f"request id {request_id!r} was used for a different submit (saga {row.saga_id})",
            saga_id=row.saga_id,
        )
    return row.saga_id


def record(session: Session, request_id: str, saga_id: str, digest: str) -> None:
    """In the submit's transaction; a concurrent twin fails on the primary key."""
    session.add(SubmitRequestRow(request_id=request_id, saga_id=saga_id, args_digest=digest))
    session.flush()


__all__ = ["args_digest", "check_request_id", "find", "record"]

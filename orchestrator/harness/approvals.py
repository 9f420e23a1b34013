"""Approvals bound to an exact version: the binding, its token, its checks.

An approval names one saga, one version digest, one destination set, one
session (the saga's run) and an expiry, and is issued to a named person. Its
token is an HMAC-SHA256 over the canonical binding with the server's secret,
so a row edited in the database no longer verifies. Consumption (once, by one
execution) is the store's atomic update; everything here is pure.
"""

from __future__ import annotations

import hmac
from datetime import datetime
from enum import StrEnum
from hashlib import sha256
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from orchestrator.harness.digests import canonical_json


class ApprovalBinding(BaseModel):
    model_config = ConfigDict(frozen=True)

    saga_id: str
    version: int
    version_digest: str
    destinations: tuple[str, ...]
    session: str
    approver: str
    expires_at: datetime

    def canonical(self) -> bytes:
        body = self.model_dump(mode="json")
        body["destinations"] = sorted(self.destinations)
        return canonical_json(body)


class ApprovalView(BaseModel):
    """An issued approval as the store holds it."""

    model_config = ConfigDict(frozen=True)

    approval_id: str
    binding: ApprovalBinding
    token: str
    consumed_by: str | None = None
    voided: bool = False


class ApprovalRequest(BaseModel):
    """What one high-risk call needs an approval for."""

    model_config = ConfigDict(frozen=True)

    saga_id: str
    version_digest: str
    destination: str
    session: str
    execution: str


def session_for(saga_id: str, run: int) -> str:
    return f"{saga_id}:{run}"


def mint(binding: ApprovalBinding, key: bytes) -> str:
    return hmac.new(key, binding.canonical(), sha256).hexdigest()


class ApprovalProblem(StrEnum):
    """Why an approval does not authorize a call: the typed half of `ApprovalFault`."""

    MISSING = "missing"
    FORGED = "forged"
    VOIDED = "voided"
    OTHER_SAGA = "other_saga"
    OTHER_VERSION = "other_version"
    DESTINATION = "destination"
    OTHER_RUN = "other_run"
    USED = "used"
    EXPIRED = "expired"


class ApprovalFault(NamedTuple):
    problem: ApprovalProblem
    text: str


def problem(
    approval: ApprovalView | None, want: ApprovalRequest, *, key: bytes, now: datetime
) -> ApprovalFault | None:
    """Why `approval` does not authorize `want` (kind and words), or None when it does."""
    if approval is None:
        return ApprovalFault(ApprovalProblem.MISSING, "no approval for this version")
    b = approval.binding
    if not hmac.compare_digest(mint(b, key), approval.token):
        return ApprovalFault(ApprovalProblem.FORGED, "approval token does not verify")
    if approval.voided:
        return ApprovalFault(ApprovalProblem.VOIDED, "approval was voided by a later edit or rejection")
    if b.saga_id != want.saga_id:
        return ApprovalFault(ApprovalProblem.OTHER_SAGA, "approval belongs to another saga")
    if b.version_digest != want.version_digest:
        return ApprovalFault(ApprovalProblem.OTHER_VERSION, "approval is for another version")
    if want.destination not in b.destinations:
        return ApprovalFault(
            ApprovalProblem.DESTINATION, f"approval does not cover destination {want.destination}"
        )
    if b.session != want.session:
        return ApprovalFault(ApprovalProblem.OTHER_RUN, "approval belongs to another run of this saga")
    if approval.consumed_by is not None and approval.consumed_by != want.execution:
        return ApprovalFault(ApprovalProblem.USED, "approval was already used by another execution")
    if approval.consumed_by is None and b.expires_at <= now:
        return ApprovalFault(ApprovalProblem.EXPIRED, "approval expired")
    return None


def refusal(approval: ApprovalView | None, want: ApprovalRequest, *, key: bytes, now: datetime) -> str | None:
    """Why `approval` does not authorize `want`, in words, or None when it does."""
    fault = problem(approval, want, key=key, now=now)
    return fault.text if fault else None


__all__ = [
    "ApprovalBinding",
    "ApprovalFault",
    "ApprovalProblem",
    "problem",
    "ApprovalRequest",
    "ApprovalView",
    "mint",
    "refusal",
    "session_for",
]

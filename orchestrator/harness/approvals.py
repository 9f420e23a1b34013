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
from hashlib import sha256

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


def refusal(approval: ApprovalView | None, want: ApprovalRequest, *, key: bytes, now: datetime) -> str | None:
    """Why `approval` does not authorize `want`, or None when it does."""
    if approval is None:
        return "no approval for this version"
    b = approval.binding
    if not hmac.compare_digest(mint(b, key), approval.token):
        return "approval token does not verify"
    if approval.voided:
        return "approval was voided by a later edit or rejection"
    if b.saga_id != want.saga_id:
        return "approval belongs to another saga"
    if b.version_digest != want.version_digest:
        return "approval is for another version"
    if want.destination not in b.destinations:
        return f"approval does not cover destination {want.destination}"
    if b.session != want.session:
        return "approval belongs to another run of this saga"
    if approval.consumed_by is not None and approval.consumed_by != want.execution:
        return "approval was already used by another execution"
    if approval.consumed_by is None and b.expires_at <= now:
        return "approval expired"
    return None


__all__ = ["ApprovalBinding", "ApprovalRequest", "ApprovalView", "mint", "refusal", "session_for"]

"""An approval's approver, checked when the approval is used: may they still carry it?

Open mode (no user yet) honours every approval; in closed mode the approver must be an
active user who still holds `reviewer` (`orchestrator.store.approval_rows` asks on consumption).
"""

from __future__ import annotations

from sqlmodel import Session, select

from orchestrator.harness.principals import Role
from orchestrator.store.people_tables import UserRow


def any_user(s: Session) -> bool:
    return s.exec(select(UserRow.id).limit(1)).first() is not None


def approver_lapse(s: Session, approver_id: str | None, approver: str) -> str | None:
    """Why an approval's approver can no longer carry it (in the caller's transaction), or None.

    Open mode (no user): honoured. Closed mode: the approver must be an
    active user who still holds `reviewer`.
    """
    if not any_user(s):
        return None
    row = s.get(UserRow, approver_id) if approver_id else None
    return lapse_reason(True, (row.active, row.roles, row.display) if row else None, approver)


def lapse_reason(closed: bool, user: tuple[bool, list[str], str] | None, approver: str) -> str | None:
    """`approver_lapse` on what was read: closed mode, and the approver's user row
    (active, roles, display name) or None when the approver is no user."""
    if not closed:
        return None
    if user is None:
        return f"approver {approver} is not a user (approved without one); a reviewer must approve again"
    active, roles, display = user
    if not active:
        return f"approver {display} was revoked after approving"
    if Role.REVIEWER.value not in roles:
        return f"approver {display} no longer holds the reviewer role"
    return None


__all__ = ["any_user", "approver_lapse", "lapse_reason"]

"""The role kinds Pressroom ships: researcher, writer and reviewer.

Importing this module registers them (`roles.kinds.register`); each kind's
turn is its own module (`roles.turns_research`, `roles.turns_write`,
`roles.turns_review`). A kind from elsewhere is one module like these, loaded
through the `pressroom.role_kinds` entry points (`roles.kind_plugins`).
"""

from __future__ import annotations

from orchestrator.core.routing import DRAFT, RESEARCH, REVIEW
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from roles.kinds import RoleKind, register
from roles.turns_research import research_turn
from roles.turns_review import review_turn
from roles.turns_write import write_turn

RESEARCHER = register(
    RoleKind("researcher", "researcher", RESEARCH, "evidence", ROLE_CAPABILITIES["researcher"], research_turn)
)
WRITER = register(RoleKind("writer", "writer", DRAFT, "version", ROLE_CAPABILITIES["writer"], write_turn))
REVIEWER = register(
    RoleKind("reviewer", "reviewer", REVIEW, "verdict", ROLE_CAPABILITIES["reviewer"], review_turn)
)

__all__ = ["RESEARCHER", "REVIEWER", "WRITER"]

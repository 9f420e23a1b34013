"""Capability sets: they only ever shrink (invariant 7). No I/O."""

from __future__ import annotations

from collections.abc import Iterable

from orchestrator.core.errors import PolicyRefused

Capabilities = frozenset[str]

# What each role may ever do, whatever a handoff asks for.
ROLE_CAPABILITIES: dict[str, Capabilities] = {
    "researcher": frozenset({"corpus.search", "corpus.read", "evidence.record"}),
    "writer": frozenset({"draft.write"}),
    "reviewer": frozenset({"corpus.read", "review.record"}),
    "publisher": frozenset({"publish", "publish.compensate", "publish.status"}),
}

# The widest set the coordinator ever hands out.
ROOT_CAPABILITIES: Capabilities = frozenset().union(*ROLE_CAPABILITIES.values())


def caps(names: Iterable[str]) -> Capabilities:
    return frozenset(names)


def narrow(parent: Capabilities, task: Capabilities, role: Capabilities) -> Capabilities:
    """C_child = C_parent ∩ C_task ∩ C_role."""
    return parent & task & role


def require_within(requested: Capabilities, granted: Capabilities, *, who: str) -> Capabilities:
    """Refuse a request wider than what was granted; return it otherwise."""
    extra = requested - granted
    if extra:
        raise PolicyRefused(
            f"{who} asked for capabilities it was not granted: {', '.join(sorted(extra))}",
            extra=sorted(extra),
        )
    return requested


__all__ = ["ROLE_CAPABILITIES", "ROOT_CAPABILITIES", "Capabilities", "caps", "narrow", "require_within"]

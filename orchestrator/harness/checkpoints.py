"""`AgentState` and its hash chain. No I/O.

A checkpoint is committed before every side effect. Each one's hash covers
its state and the previous hash, so a gap or an edited row breaks the chain.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.harness.digests import canonical_json, sha256_hex

GENESIS = "0" * 64


class AgentState(BaseModel):
    model_config = ConfigDict(frozen=True)

    event_id: str
    step: int
    tool: str
    idempotency_key: str | None
    args_digest: str
    messages: list[dict[str, Any]] = []
    pending_approval: str | None = None


def chain_hash(prev_hash: str, state: AgentState) -> str:
    return sha256_hex(prev_hash.encode() + canonical_json(state.model_dump(mode="json")))


def verify_chain(links: list[tuple[str, str, AgentState]]) -> int | None:
    """Index of the first broken link in [(prev_hash, hash, state)], or None."""
    expected_prev = GENESIS
    for i, (prev, digest, state) in enumerate(links):
        if prev != expected_prev or chain_hash(prev, state) != digest:
            return i
        expected_prev = digest
    return None


__all__ = ["GENESIS", "AgentState", "chain_hash", "verify_chain"]

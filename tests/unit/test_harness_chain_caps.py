"""Checkpoint chains (an edited or missing link is found) and capability narrowing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.faults import Bench
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.core.errors import PolicyRefused
from orchestrator.harness.capabilities import (
    ROLE_CAPABILITIES,
    ROOT_CAPABILITIES,
    caps,
    narrow,
    require_within,
)
from orchestrator.harness.checkpoints import GENESIS, AgentState, chain_hash, verify_chain

Link = tuple[str, str, AgentState]


def _state(step: int) -> AgentState:
    return AgentState(
        event_id=f"e{step}", step=step, tool="publish", idempotency_key=f"k{step}", args_digest=str(step) * 64
    )


def _chain(n: int) -> list[Link]:
    links: list[Link] = []
    prev = GENESIS
    for step in range(1, n + 1):
        state = _state(step)
        digest = chain_hash(prev, state)
        links.append((prev, digest, state))
        prev = digest
    return links


def test_an_intact_chain_verifies() -> None:
    assert verify_chain(_chain(5)) is None
    assert verify_chain([]) is None


def test_an_edited_state_breaks_its_link() -> None:
    links = _chain(5)
    prev, digest, state = links[2]
    links[2] = (prev, digest, state.model_copy(update={"args_digest": "f" * 64}))
    assert verify_chain(links) == 2


def test_an_edited_hash_breaks_the_next_link_too() -> None:
    links = _chain(4)
    prev, _, state = links[1]
    links[1] = (prev, "0" * 64, state)
    assert verify_chain(links) == 1


def test_a_missing_link_is_found_where_the_gap_is() -> None:
    links = _chain(5)
    del links[2]
    assert verify_chain(links) == 2


def test_a_chain_must_start_at_genesis() -> None:
    assert verify_chain(_chain(3)[1:]) == 0


def test_a_rehashed_forgery_still_fails_at_the_next_link() -> None:
    links = _chain(4)
    prev, _, state = links[1]
    forged = state.model_copy(update={"tool": "shell.run"})
    links[1] = (prev, chain_hash(prev, forged), forged)
    assert verify_chain(links) == 2


def test_the_store_chains_checkpoints_per_saga_and_an_edit_is_found() -> None:
    store = MemoryHarnessStore()
    one, two = Bench(store), Bench(store)
    for b in (one, two):
        b.approve(destinations=("fake:one", "fake:two"))
        for destination in ("fake:one", "fake:two"):
            assert b.harness.call(b.publish_call(destination=destination), b.caller()).applied
    chain = store.checkpoint_chain(one.saga_id)
    assert len(chain) == 2 and verify_chain(chain) is None
    assert verify_chain(store.checkpoint_chain(two.saga_id)) is None
    prev, digest, state = chain[1]
    chain[1] = (prev, digest, state.model_copy(update={"messages": []}))
    assert verify_chain(chain) == 1


# -- capabilities -------------------------------------------------------------------------------
def test_narrow_is_the_intersection_of_parent_task_and_role() -> None:
    parent = caps(["corpus.read", "corpus.search", "publish"])
    task = caps(["corpus.read", "publish", "draft.write"])
    assert narrow(parent, task, ROLE_CAPABILITIES["researcher"]) == {"corpus.read"}
    assert narrow(parent, task, ROLE_CAPABILITIES["publisher"]) == {"publish"}
    assert narrow(parent, frozenset(), ROLE_CAPABILITIES["publisher"]) == frozenset()


NAMES = st.frozensets(st.sampled_from(sorted(ROOT_CAPABILITIES | {"shell.run", "approval.grant"})))


@settings(max_examples=100, deadline=None)
@given(parent=NAMES, task=NAMES, role=NAMES)
def test_a_child_never_holds_more_than_any_of_its_sources(
    parent: frozenset[str], task: frozenset[str], role: frozenset[str]
) -> None:
    child = narrow(parent, task, role)
    assert child <= parent and child <= task and child <= role
    assert narrow(child, task, role) == child  # narrowing again changes nothing


def test_require_within_returns_a_subset_and_refuses_more() -> None:
    granted = ROLE_CAPABILITIES["writer"]
    assert require_within(frozenset({"draft.write"}), granted, who="a handoff") == {"draft.write"}
    assert require_within(frozenset(), granted, who="a handoff") == frozenset()
    with pytest.raises(
        PolicyRefused, match="a handoff asked for capabilities it was not granted: publish"
    ) as exc:
        require_within(frozenset({"draft.write", "publish"}), granted, who="a handoff")
    assert exc.value.extra == ["publish"]  # type: ignore[attr-defined]
    assert exc.value.exit_code == 4


def test_the_root_set_is_the_union_of_the_roles_and_holds_no_denied_tool() -> None:
    assert frozenset().union(*ROLE_CAPABILITIES.values()) == ROOT_CAPABILITIES
    assert not ROOT_CAPABILITIES & {"approval.grant", "capability.grant", "shell.run"}
    assert "publish" in ROLE_CAPABILITIES["publisher"] and "publish" not in ROLE_CAPABILITIES["writer"]

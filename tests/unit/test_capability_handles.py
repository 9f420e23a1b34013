"""Capability handles, pure: mint, narrow, encode/verify, admit and check."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.harness.handles import (
    LIFETIME,
    CallView,
    Handle,
    HandleRefused,
    Problem,
    Task,
    admit,
    check,
    encode,
    mint,
    narrow,
    use_key,
    verify,
)

KEY = b"k" * 32
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
TABLE = frozenset({"publish", "publish.compensate", "publish.status"})
DESTS = frozenset({"memory://a", "memory://b"})


def root(**task: object) -> Handle:
    t = Task(actions=TABLE, destinations=DESTS, counts={"publish": 2}, **task)  # type: ignore[arg-type]
    return mint(handle_id="h1", saga_id="s1", role="publisher", table=TABLE, task=t, now=NOW)


def refused(token: str) -> Problem:
    with pytest.raises(HandleRefused) as info:
        verify(token, KEY)
    return info.value.fault.problem


def test_mint_is_the_table_meeting_the_task() -> None:
    task = Task(actions=frozenset({"publish", "corpus.read"}), corpus="/c", tools=frozenset({"mcp:s/t"}))
    h = mint(handle_id="h", saga_id="s", role="r", table=TABLE, task=task, now=NOW)
    assert h.actions == ("publish",)
    assert (h.corpus, h.tools, h.expires_at, h.parent) == ("/c", ("mcp:s/t",), NOW + LIFETIME, None)


def test_encode_then_verify_gives_the_same_handle() -> None:
    h = root()
    assert verify(encode(h, KEY), KEY) == h


def test_forged_signature_is_refused() -> None:
    token = encode(root(), b"another key, not the server's.")
    assert refused(token) is Problem.FORGED


def test_a_tampered_field_no_longer_verifies() -> None:
    body, sig = encode(root(), KEY).split(".")
    raw = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw["destinations"].append("memory://evil")
    forged = base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")
    assert refused(f"{forged}.{sig}") is Problem.FORGED


def test_an_unknown_version_is_refused_even_when_signed() -> None:
    raw = root().model_dump(mode="json") | {"v": 2}
    from orchestrator.harness import handles

    body = json.dumps(raw, sort_keys=True).encode()
    token = f"{base64.urlsafe_b64encode(body).decode()}.{handles._sign(body, KEY)}"
    assert refused(token) is Problem.VERSION


@pytest.mark.parametrize("token", [None, "", "no-dot", "a.b.c", "!!!.00"])
def test_missing_or_malformed_tokens_are_refused(token: str | None) -> None:
    assert refused(token) in (Problem.MISSING, Problem.MALFORMED, Problem.FORGED)  # type: ignore[arg-type]


def test_admit_checks_saga_role_and_expiry() -> None:
    h = root()
    assert admit(h, saga_id="s1", role="publisher", now=NOW) is None
    assert admit(h, saga_id="s2", role="publisher", now=NOW).problem is Problem.OTHER_SAGA  # type: ignore[union-attr]
    assert admit(h, saga_id="s1", role="writer", now=NOW).problem is Problem.OTHER_ROLE  # type: ignore[union-attr]
    corpus = admit(
        h.model_copy(update={"corpus": "/c"}), saga_id="s1", role="publisher", now=NOW, corpus="/d"
    )
    assert corpus is not None and corpus.problem is Problem.RESOURCE
    assert (
        admit(h.model_copy(update={"corpus": "/c"}), saga_id="s1", role="publisher", now=NOW, corpus="/c")
        is None
    )
    late = NOW + LIFETIME
    assert admit(h, saga_id="s1", role="publisher", now=late).problem is Problem.EXPIRED  # type: ignore[union-attr]


def test_check_action_resource_count_and_expiry() -> None:
    h = root()
    ok = CallView(action="publish", tool="publish", saga_id="s1", destination="memory://a")
    assert check(h, ok, now=NOW) is None
    assert check(h, ok, now=NOW, used=1) is None
    assert check(h, ok, now=NOW, used=2).problem is Problem.COUNT  # type: ignore[union-attr]
    assert check(h, ok, now=NOW + LIFETIME).problem is Problem.EXPIRED  # type: ignore[union-attr]
    other = CallView(action="publish", tool="publish", destination="memory://c")
    assert check(h, other, now=NOW).problem is Problem.RESOURCE  # type: ignore[union-attr]
    wrong = CallView(action="corpus.read", tool="corpus.read")
    assert check(h, wrong, now=NOW).problem is Problem.ACTION  # type: ignore[union-attr]
    saga = CallView(action="publish", tool="publish", saga_id="s2")
    assert check(h, saga, now=NOW).problem is Problem.OTHER_SAGA  # type: ignore[union-attr]
    # Uncounted actions are not limited by the handle.
    status = CallView(action="publish.status", tool="publish.status")
    assert check(h, status, now=NOW, used=100) is None


def test_check_names_mcp_tools_only_from_the_declared_set() -> None:
    task = Task(actions=frozenset({"mcp:s/a", "mcp:s/b"}), tools=frozenset({"mcp:s/a"}))
    h = mint(handle_id="h", saga_id="s", role="r", table=task.actions, task=task, now=NOW)
    assert check(h, CallView(action="mcp:s/a", tool="mcp:s/a"), now=NOW) is None
    fault = check(h, CallView(action="mcp:s/b", tool="mcp:s/b"), now=NOW)
    assert fault is not None and fault.problem is Problem.RESOURCE


def test_check_corpus() -> None:
    h = mint(handle_id="h", saga_id="s", role="r", table=TABLE, task=Task(TABLE, corpus="/c"), now=NOW)
    assert check(h, CallView(action="publish", tool="publish", corpus="/c"), now=NOW) is None
    fault = check(h, CallView(action="publish", tool="publish", corpus="/d"), now=NOW)
    assert fault is not None and fault.problem is Problem.RESOURCE


def test_narrow_takes_depth_and_the_task() -> None:
    parent = root()
    child = narrow(parent, child_id="h2", task=Task(actions=frozenset({"publish"}), destinations=DESTS))
    assert (child.parent, child.depth, child.actions) == ("h1", 0, ("publish",))
    assert child.counts == {"publish": 2}
    with pytest.raises(HandleRefused) as info:
        narrow(child, child_id="h3")
    assert info.value.fault.problem is Problem.DEPTH


def test_a_signed_grandchild_beyond_the_depth_is_refused() -> None:
    child = narrow(root(), child_id="h2")
    beyond = child.model_copy(update={"id": "h3", "parent": "h2", "depth": child.depth - 1})
    assert refused(encode(beyond, KEY)) is Problem.DEPTH


@pytest.mark.parametrize(
    "ask",
    [
        {"actions": ["publish", "corpus.read"]},
        {"destinations": ["memory://a", "memory://z"]},
        {"tools": ["mcp:s/t"]},
        {"counts": {"publish": 3}},
        {"expires_at": NOW + LIFETIME + timedelta(seconds=1)},
    ],
)
def test_narrow_refuses_any_widening(ask: dict[str, object]) -> None:
    with pytest.raises(HandleRefused) as info:
        narrow(root(), child_id="h2", **ask)  # type: ignore[arg-type]
    assert info.value.fault.problem is Problem.WIDENED


def test_use_key_is_the_call_not_its_delivery() -> None:
    assert use_key("publish", "d1") == use_key("publish", "d1") != use_key("publish", "d2")


NAMES = st.frozensets(st.sampled_from(["a", "b", "c", "d"]))


@given(
    actions=NAMES,
    dests=NAMES,
    tools=NAMES,
    task_actions=NAMES,
    task_dests=NAMES,
    count=st.integers(0, 5),
    asked=st.integers(0, 5),
    seconds=st.integers(-100, 100),
)
def test_narrow_never_widens(
    actions: frozenset[str],
    dests: frozenset[str],
    tools: frozenset[str],
    task_actions: frozenset[str],
    task_dests: frozenset[str],
    count: int,
    asked: int,
    seconds: int,
) -> None:
    parent = Handle(
        id="p",
        saga_id="s",
        role="r",
        actions=tuple(sorted(actions | {"a"})),
        destinations=tuple(sorted(dests)),
        tools=tuple(sorted(tools)),
        counts={"a": count},
        expires_at=NOW,
        depth=1,
    )
    task = Task(actions=task_actions, destinations=task_dests, tools=tools)
    try:
        child = narrow(
            parent,
            child_id="c",
            actions=actions,
            destinations=dests,
            counts={"a": asked},
            expires_at=NOW + timedelta(seconds=seconds),
            task=task,
        )
    except HandleRefused:
        return
    assert set(child.actions) <= set(parent.actions) & task_actions
    assert set(child.destinations) <= set(parent.destinations) & task_dests
    assert set(child.tools) <= set(parent.tools)
    assert all(n <= parent.counts.get(a, n) for a, n in child.counts.items())
    assert child.expires_at <= parent.expires_at
    assert child.depth == parent.depth - 1 and child.saga_id == parent.saga_id


def test_the_grants_the_coordinator_mints() -> None:
    """A role's: its kind's table, its declared tools, the saga's corpus; the publisher's: its
    table on the saga's destinations, one publish and one undo each; 24 hours, one hand-on."""
    from orchestrator.core.pipeline import RoleDecl
    from orchestrator.store.tables import SagaRow
    from roles.rounds import role_grant
    from sagas.execution_steps import publisher_grant

    assert timedelta(hours=24) == LIFETIME
    saga = SagaRow(id="s", brief="b", corpus="/corpus", destinations=["memory://a"])
    decl = RoleDecl(name="scout", kind="researcher", tools=("mcp:docs/search",))
    role = role_grant(saga, frozenset({"corpus.read"}), decl).mint(handle_id="w", saga_id="s", now=NOW)
    assert (role.role, role.actions, role.tools) == (
        "scout",
        ("corpus.read", "mcp:docs/search"),
        ("mcp:docs/search",),
    )
    assert (role.corpus, role.destinations, role.counts, role.depth) == ("/corpus", (), {}, 1)
    pub = publisher_grant(DESTS).mint(handle_id="w", saga_id="s", now=NOW)
    assert pub.actions == tuple(sorted(TABLE)) and pub.destinations == tuple(sorted(DESTS))
    assert pub.counts == {"publish": 2, "publish.compensate": 2} and pub.depth == 1


def test_a_handle_for_many_long_destinations_fits_a_handoff() -> None:
    from outbox.messages import Handoff

    many = frozenset(f"webhook:https://example.org/{i:04d}/{'x' * 2000}" for i in range(100))
    task = Task(actions=TABLE, destinations=many, counts={"publish": 100})
    token = encode(mint(handle_id="w", saga_id="s", role="publisher", table=TABLE, task=task, now=NOW), KEY)
    assert verify(Handoff(saga_id="s", work_id="w", handle=token).handle, KEY).destinations == tuple(
        sorted(many)
    )

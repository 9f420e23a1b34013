"""Properties over random proposal sequences through `run_loop`.

Random tools (read-only, reversible, high-risk, denied, unknown), random
capability sets, valid and invalid arguments, random approvals (none, valid,
or one of the misuses) and random destination faults. Whatever the mix:

* every executor call is within the caller's capabilities;
* no high-risk executor call happens without a valid approval;
* a committed publish (its checkpoint and pending ledger row) carries the
  args digest of exactly the approved version, destination and saga;
* at most one effect per business key;
* the loop's budget never goes negative and bounds the steps.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from evaluation.fault_scenarios import no_sleep
from evaluation.faults import ALL_CAPS, DEST, OTHER_DEST, SIGNING_KEY, Bench, ScriptedPlanner, call
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.harness.approvals import ApprovalRequest, refusal
from orchestrator.harness.digests import args_digest
from orchestrator.harness.spec import ToolCall
from orchestrator.toolpath.loop import LoopLimits, run_loop

TOOLS = ["fetch", "note.write", "publish", "shell.run", "approval.grant", "no.such.tool"]
SHAPES = ["valid", "invalid", "other-digest", "other-destination", "text"]
APPROVALS = [
    "none",
    "valid",
    "both-destinations",
    "expired",
    "forged",
    "consumed-elsewhere",
    "voided",
    "other-run",
]


def _arrange_approval(b: Bench, kind: str) -> None:
    if kind == "valid":
        b.approve()
    elif kind == "both-destinations":
        b.approve(destinations=(DEST, OTHER_DEST))
    elif kind == "expired":
        b.approve(expires_at=b.now - timedelta(seconds=1))
    elif kind == "forged":
        b.approve(token="f" * 64)
    elif kind == "consumed-elsewhere":
        b.approve(consumed_by=b.saga_id + ":0")
    elif kind == "voided":
        b.approve(voided=True)
    elif kind == "other-run":
        b.approve(session=b.saga_id + ":7")


def _proposal(b: Bench, tool: str, shape: str, n: int) -> ToolCall:
    if shape == "text":
        return call(tool, '{"not": json' if n % 2 else "[1, 2, 3]")
    if tool == "publish":
        if shape == "invalid":
            return call(tool, {**b.publish_args(), "version_digest": "nope"})
        if shape == "other-digest":
            return b.publish_call(digest=f"{n % 10}" * 64)
        if shape == "other-destination":
            return b.publish_call(destination=OTHER_DEST)
        return b.publish_call()
    args: dict[str, Any] = {
        "fetch": {"source": "notes.md"},
        "note.write": {"saga_id": b.saga_id, "text": f"note {n % 3}"},
    }.get(tool, {"anything": n})
    if shape == "invalid":
        args = {**args, "unexpected": True} if tool in ("fetch", "note.write") else args
    return call(tool, args)


def _committed_publishes_match_the_approval(store: MemoryHarnessStore, b: Bench) -> None:
    for checkpoint in store.checkpoints(b.saga_id):
        state = checkpoint.state
        if state.tool != "publish":
            continue
        arguments = state.messages[0]["arguments"]
        assert state.args_digest == args_digest(arguments)
        assert state.idempotency_key is not None
        ledger = store.ledger_get(state.idempotency_key)
        assert ledger is not None and ledger.args_digest == state.args_digest
        approval = store.find_approval(b.saga_id, arguments["version_digest"])
        assert approval is not None, "a publish committed without an approval"
        bound = approval.binding
        assert (arguments["saga_id"], arguments["version_digest"]) == (bound.saga_id, bound.version_digest)
        assert arguments["version_digest"] == b.digest and arguments["destination"] in bound.destinations
        want = ApprovalRequest(
            saga_id=b.saga_id,
            version_digest=b.digest,
            destination=arguments["destination"],
            session=b.session,
            execution=b.session,
        )
        assert refusal(approval, want, key=SIGNING_KEY, now=b.now) is None
        assert state.pending_approval == approval.approval_id


# Weighted so that many examples get as far as a publish: full capabilities and a
# valid approval are common, and so are budgets that leave room for several calls.
CAPS = st.one_of(st.just(ALL_CAPS), st.frozensets(st.sampled_from(sorted(ALL_CAPS))))
STEPS = st.lists(
    st.tuples(st.sampled_from([*TOOLS, "publish", "publish"]), st.sampled_from([*SHAPES, "valid", "valid"])),
    min_size=1,
    max_size=25,
)


@settings(max_examples=100, deadline=None)
@given(
    caps=CAPS,
    approval=st.one_of(st.sampled_from(["valid", "both-destinations"]), st.sampled_from(APPROVALS)),
    steps=STEPS,
    faults=st.lists(st.sampled_from(["timeout-after", "timeout-before", "not-applied"]), max_size=3),
    probe=st.booleans(),
    budget=st.one_of(st.integers(min_value=4, max_value=30), st.integers(min_value=0, max_value=3)),
    max_steps=st.integers(min_value=1, max_value=30),
)
def test_random_proposal_sequences_keep_the_invariants(
    caps: frozenset[str],
    approval: str,
    steps: list[tuple[str, str]],
    faults: list[Any],
    probe: bool,
    budget: int,
    max_steps: int,
) -> None:
    store = MemoryHarnessStore()
    b = Bench(store, probe=probe)
    _arrange_approval(b, approval)
    b.dest.faults = list(faults)
    planner = ScriptedPlanner([_proposal(b, tool, shape, n) for n, (tool, shape) in enumerate(steps)])
    limits = LoopLimits(max_steps=max_steps, budget=budget, max_rejections=30, max_retries=30)

    outcome = run_loop(b.harness, planner, b.caller(caps), limits, sleep=no_sleep)
    event(f"publish executor calls: {min(b.calls['publish'], 2)}")
    event(f"stopped: {outcome.stop_reason.split(':')[0][:30]}")

    assert set(b.executed) <= caps, "an executor ran outside the caller's capabilities"
    assert b.dest.unapproved == 0, "a high-risk executor ran without a valid approval"
    if approval not in ("valid", "both-destinations"):
        assert b.calls["publish"] == 0
    _committed_publishes_match_the_approval(store, b)
    assert b.dest.duplicates == 0
    assert outcome.budget_left >= 0
    assert outcome.steps == len(outcome.results) <= min(budget, max_steps, len(steps))
    assert outcome.budget_left == budget - outcome.steps


@settings(max_examples=50, deadline=None)
@given(replays=st.integers(min_value=1, max_value=6), restart_each=st.booleans())
def test_one_effect_per_business_key_across_any_number_of_replays(replays: int, restart_each: bool) -> None:
    b = Bench(MemoryHarnessStore())
    b.approve()
    first = b.harness.call(b.publish_call(), b.caller())
    for _ in range(replays):
        if restart_each:
            b.restart()
        again = b.harness.call(b.publish_call(), b.caller())
        assert again.status.value == "replayed" and again.output == first.output
    assert b.dest.calls == 1 and b.dest.total_effects == 1


def test_a_negative_budget_is_refused_or_clamped() -> None:
    b = Bench(MemoryHarnessStore())
    try:
        limits = LoopLimits(budget=-1)
    except ValueError:
        return
    outcome = run_loop(b.harness, ScriptedPlanner([]), b.caller(), limits, sleep=no_sleep)
    assert outcome.budget_left >= 0

"""`pressroom evidence harness`: run the fault-injection scenarios, write measured numbers.

The scenarios of `evaluation.fault_scenarios` run on the in-memory
store and on a temporary SQLite database (through `SqlRig`, the SQL store
plus the seeding they need); two full publishing flows run through
`build_app` with a `memory:` destination whose publish applies and then times
out. Every number in the report is counted from what ran:

* `schema_validity`: share of malformed proposals (`malformed_proposals`,
  round-robin over the kinds in `MALFORMED`) answered `rejected` before any
  executor call (an exception escaping the harness is not a rejection);
* `unapproved_side_effects`: high-risk executor calls made while no valid
  approval covered them;
* `duplicate_side_effects`: effects beyond one per business key across
  replays, redeliveries and crash restarts;
* `recoverable_fault_recovery_rate`: share of recoverable injected faults
  that ended in the correct state with no person involved.

The side door (the executor called without the harness) is measured beside
each scenario under `without_harness`, to show what the defences prevent.
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from sqlmodel import Session, col, select

import roles
from evaluation.fault_scenarios import ROW_TIMEOUT, Outcome, run_scenarios
from evaluation.faults import Bench, Rig, call
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.harness.approvals import ApprovalBinding, session_for
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.spec import ToolCall, ToolStatus
from orchestrator.store.db import dispose_all, make_engine, unit_of_work
from orchestrator.store.events import add_event
from orchestrator.store.harness_store import SqlHarnessStore, approval_row
from orchestrator.store.tables import CheckpointRow, SagaRow, utcnow
from orchestrator.toolpath.engine import Caller
from sagas import records
from sagas.destinations.memory import memory_store
from sagas.machine import SagaEvent, SagaState

SAMPLE_CORPUS = Path(roles.__file__).parent / "sample_corpus"
BRIEF = "Write a short history of the Millbrook public library network, its branches and the bookmobile."
MALFORMED_COUNT = 240


class SqlRig(SqlHarnessStore):
    """`SqlHarnessStore` plus the seeding fault scenarios need: saga rows and approvals."""

    def add_saga(self, saga_id: str, *, run: int = 1, destinations: Sequence[str] = ()) -> str:
        """An `executing` saga at version 1, reached (and recorded) as a real one is."""
        saga = SagaRow(
            id=saga_id,
            brief="fault scenario",
            corpus="",
            destinations=list(destinations),
            state=SagaState.PREPARING,
            run=run,
            created_by="fault-bench",
        )
        with unit_of_work(self.engine) as uow:
            s = uow.session
            s.add(saga)
            s.flush()
            add_event(s, saga_id=saga_id, actor="fault-bench", kind="saga", status="submitted")
            records.add_version(
                s,
                saga,
                title="fault scenario",
                markdown="fault scenario",
                author="fault-bench",
                citations=[],
                evidence_digest=None,
            )
            for step in (SagaEvent.REVIEW_PASSED, SagaEvent.APPROVED, SagaEvent.EXECUTION_STARTED):
                records.transition(s, saga, step, actor="fault-bench")
        return session_for(saga_id, run)

    def add_approval(
        self, binding: ApprovalBinding, token: str, *, consumed_by: str | None = None, voided: bool = False
    ) -> str:
        now = utcnow()
        row = approval_row(binding, token, issued_at=now)
        row.consumed_at = now if consumed_by is not None else None
        row.consumed_by = consumed_by
        row.voided_at = now if voided else None
        with unit_of_work(self.engine) as uow:
            uow.session.add(row)
        return row.id

    def checkpoint_chain(self, saga_id: str | None) -> list[tuple[str, str, AgentState]]:
        with Session(self.engine) as s:
            rows = s.exec(
                select(CheckpointRow).where(CheckpointRow.saga_id == saga_id).order_by(col(CheckpointRow.seq))
            ).all()
            return [(r.prev_hash, r.hash, AgentState.model_validate(r.state)) for r in rows]


# -- malformed proposals (schema validity) ----------------------------------------------------
def _nest(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return value


def _without(args: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k != name}


MALFORMED: dict[str, Callable[[Bench, random.Random], str | dict[str, Any]]] = {
    "not-json": lambda b, r: "{saga_id: " + "x" * r.randint(0, 20),
    "not-an-object": lambda b, r: r.choice(["[1, 2]", '"publish"', "42", "null"]),
    "oversized": lambda b, r: json.dumps({**b.publish_args(), "pad": "x" * (64 * 1024 + r.randint(1, 99))}),
    "too-deep": lambda b, r: {**b.publish_args(), "extra": _nest(r.randint(9, 30))},
    "nesting-bomb": lambda b, r: '{"a": ' + "[" * 20000 + "]" * 20000 + "}",
    "long-string": lambda b, r: {**b.publish_args(), "destination": "d" * (32 * 1024 + r.randint(1, 99))},
    "too-many-items": lambda b, r: {**b.publish_args(), "extra": list(range(1001 + r.randint(0, 50)))},
    "missing-field": lambda b, r: _without(
        b.publish_args(), r.choice(["saga_id", "destination", "version_digest"])
    ),
    "wrong-type": lambda b, r: {**b.publish_args(), "version_digest": r.randint(0, 10**9)},
    "extra-field": lambda b, r: {**b.publish_args(), "approved_by": "agent"},
    "bad-digest": lambda b, r: {**b.publish_args(), "version_digest": "z" * 64},
    "empty-saga": lambda b, r: {**b.publish_args(), "saga_id": ""},
}


def malformed_proposals(rig: Rig, n: int = 240, seed: int = 7) -> dict[str, Any]:
    """Send `n` malformed publishes (valid approval present) and count what stopped them."""
    b = Bench(rig)
    b.approve()
    rng = random.Random(seed)
    kinds = list(MALFORMED)
    per_kind: dict[str, dict[str, int]] = {k: {"sent": 0, "rejected": 0, "escaped": 0} for k in kinds}
    rejected = 0
    for i in range(n):
        kind = kinds[i % len(kinds)]
        calls_before = b.dest.calls
        per_kind[kind]["sent"] += 1
        try:
            result = b.harness.call(call("publish", MALFORMED[kind](b, rng)), b.caller())
        except Exception:
            per_kind[kind]["escaped"] += 1  # no answer to the planner: not a rejection
            continue
        if result.status is ToolStatus.REJECTED and b.dest.calls == calls_before:
            rejected += 1
            per_kind[kind]["rejected"] += 1
    return {"sent": n, "rejected_before_call": rejected, "executor_calls": b.dest.calls, "by_kind": per_kind}


def publish_flow(database_url: str, workdir: Path, *, status_known: bool) -> Outcome:
    """Submit, approve, publish to `memory:` with apply-then-timeout; reconcile when the status is unknown."""
    name = "evidence-" + uuid.uuid4().hex[:10]
    uri = f"memory:{name}"
    app = build_app(
        Settings(
            database_url=database_url,
            broker_url="inline://",
            secret="evidence-secret",
            secret_file=workdir / "secret",
        ),
        memory_destinations=True,
    )
    dest = memory_store(name)
    try:
        ready = app.submissions.submit(
            brief=BRIEF, corpus=str(SAMPLE_CORPUS), destinations=[uri], actor="submitter"
        )
        sid = ready["saga_id"]
        calls_before_approval = dest.calls["publish"]
        dest.fail_next_publish("applied-then-lost")
        dest.status_unknown = not status_known
        app.reviews.approve(sid, version=ready["version"], actor="editor")
        after = app.reads.status(sid)
        app.relay.sweep()
        app.consumer.drain()
        publisher = Caller(actor="publisher", capabilities=ROLE_CAPABILITIES["publisher"], saga_id=sid)
        args = {"saga_id": sid, "destination": uri, "version_digest": ready["version_digest"]}
        redelivered = app.harness.call(
            ToolCall(tool="publish", arguments=args, call_id="redelivery"), publisher
        )
        final = after
        if after["state"] == "effect-unknown":
            final = app.reviews.reconcile(
                sid, destination=uri, outcome="confirmed", actor="editor", reason="the page is live"
            )
        calls = dest.calls["publish"]
    finally:
        app.close()
    if status_known:
        out = Outcome("publish-flow-timeout-status-applied", ROW_TIMEOUT, recoverable=True)
        out.checks.update(
            succeeded_without_person=after["state"] == "succeeded",
            redelivery_replayed=redelivered.status is ToolStatus.REPLAYED,
        )
    else:
        out = Outcome("publish-flow-timeout-effect-unknown", ROW_TIMEOUT)
        out.checks.update(
            effect_unknown=after["state"] == "effect-unknown",
            step_uncertain=[d["state"] for d in after["destinations"]] == ["uncertain"],
            redelivery_uncertain=redelivered.status is ToolStatus.UNCERTAIN,
            reconciled_succeeded=final["state"] == "succeeded",
        )
    out.checks.update(
        ready_for_review=ready["state"] == "ready-for-review",
        one_effect=dest.effects == 1,
        one_publish_call=calls == 1,
        final_succeeded=final["state"] == "succeeded",
    )
    out.statuses = [after["state"], redelivered.status.value, final["state"]]
    out.calls, out.effects = calls, dest.effects
    out.duplicates = max(0, dest.effects - 1) + max(0, calls - 1)
    out.unapproved = calls_before_approval
    out.facts = {"saga_id": sid, "destination": uri, "status_calls": dest.calls["status"]}
    return out


def git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def collect() -> dict[str, Any]:
    """Run everything once and count."""
    with tempfile.TemporaryDirectory(prefix="pressroom-evidence-") as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir / 'evidence.db'}"
        rigs: dict[str, Rig] = {"memory": MemoryHarnessStore(), "sqlite": SqlRig(make_engine(url))}
        runs: list[tuple[str, Outcome]] = []
        schema: dict[str, dict[str, Any]] = {}
        try:
            for label, rig in rigs.items():
                runs += [(label, outcome) for outcome in run_scenarios(rig)]
                schema[label] = malformed_proposals(rig, n=MALFORMED_COUNT)
            for status_known in (False, True):
                runs.append(("sqlite+app", publish_flow(url, workdir, status_known=status_known)))
        finally:
            dispose_all()
    outcomes = [o for _, o in runs]
    recoverable = [o for o in outcomes if o.recoverable]
    sent = sum(s["sent"] for s in schema.values())
    rejected = sum(s["rejected_before_call"] for s in schema.values())
    return {
        "suite": "harness",
        "commit": git_commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "metrics": {
            "schema_validity": _share(rejected, sent),
            "unapproved_side_effects": sum(o.unapproved for o in outcomes),
            "duplicate_side_effects": sum(o.duplicates for o in outcomes),
            "recoverable_fault_recovery_rate": _share(
                sum(o.recovered for o in recoverable), len(recoverable)
            ),
        },
        "counts": {
            "scenarios": len(outcomes),
            "scenarios_passed": sum(o.passed for o in outcomes),
            "malformed_proposals": sent,
            "malformed_rejected_before_call": rejected,
            "malformed_escaped": sum(k["escaped"] for s in schema.values() for k in s["by_kind"].values()),
            "recoverable_faults": len(recoverable),
            "recovered_without_person": sum(o.recovered for o in recoverable),
        },
        "without_harness": {
            "unapproved_side_effects": sum(o.naive.get("unapproved", 0) for o in outcomes),
            "duplicate_side_effects": sum(o.naive.get("duplicates", 0) for o in outcomes),
            "executor_calls": sum(o.naive.get("calls", 0) for o in outcomes),
        },
        "schema": schema,
        "scenarios": [{"store": label, **o.as_dict()} for label, o in runs],
    }


def run_evidence(out_path: str) -> None:
    report = collect()
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    m, c = report["metrics"], report["counts"]
    click.echo(f"harness evidence at {report['commit'][:12]} ({report['date']}) -> {path}")
    click.echo(
        f"  scenarios passed {c['scenarios_passed']}/{c['scenarios']}; "
        f"schema_validity {m['schema_validity']} ({c['malformed_rejected_before_call']}/{c['malformed_proposals']}, "
        f"{c['malformed_escaped']} escaped)"
    )
    click.echo(
        f"  unapproved_side_effects {m['unapproved_side_effects']} "
        f"(without harness {report['without_harness']['unapproved_side_effects']}); "
        f"duplicate_side_effects {m['duplicate_side_effects']} "
        f"(without harness {report['without_harness']['duplicate_side_effects']}); "
        f"recoverable_fault_recovery_rate {m['recoverable_fault_recovery_rate']} "
        f"({c['recovered_without_person']}/{c['recoverable_faults']})"
    )
    for failed in (s for s in report["scenarios"] if not s["passed"]):
        bad = ", ".join(k for k, ok in failed["checks"].items() if not ok)
        click.echo(f"  FAILED {failed['store']} {failed['name']}: {bad}")


__all__ = [
    "MALFORMED",
    "SqlRig",
    "collect",
    "git_commit",
    "malformed_proposals",
    "publish_flow",
    "run_evidence",
]

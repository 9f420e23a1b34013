"""Reading what happened: the CLI as a user runs it, and the database as the
checker needs it (sagas, steps, approvals, ledger keys)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from chaos.checker import Approval, Saga, Step
from chaos.cluster import PRESSROOM
from orchestrator.store.tables import ApprovalRow, LedgerRow, SagaRow, StepRow


@dataclass(frozen=True)
class CliResult:
    code: int
    out: dict[str, Any] | None
    err: str


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> CliResult:
    try:
        done = subprocess.run(
            [PRESSROOM, *args, "--json"], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return CliResult(-1, None, f"timed out after {timeout}s")
    try:
        out = json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        out = None
    return CliResult(done.returncode, out if isinstance(out, dict) else None, done.stderr.strip())


@dataclass(frozen=True)
class Snapshot:
    sagas: tuple[Saga, ...]
    head: dict[str, int]  # saga id -> head version
    approvals: tuple[Approval, ...]
    ledger: dict[str, str | None]


def snapshot(engine: Engine, saga_ids: set[str] | None = None) -> Snapshot:
    with Session(engine) as s:
        sagas = list(s.exec(select(SagaRow)).all())
        steps = list(s.exec(select(StepRow)).all())
        approvals = list(s.exec(select(ApprovalRow)).all())
        ledger = {row.key: row.saga_id for row in s.exec(select(LedgerRow)).all()}
    by_saga: dict[str, list[StepRow]] = {}
    for st in sorted(steps, key=lambda r: r.position):
        by_saga.setdefault(st.saga_id, []).append(st)
    out = tuple(
        Saga(
            row.id,
            row.state,
            row.reason,
            tuple(
                Step(st.uri, st.state, st.idempotency_key, st.version_digest)
                for st in by_saga.get(row.id, [])
            ),
        )
        for row in sagas
        if saga_ids is None or row.id in saga_ids
    )
    return Snapshot(
        sagas=out,
        head={row.id: row.head_version for row in sagas},
        approvals=tuple(
            Approval(a.saga_id, a.version_digest, tuple(a.destinations), a.consumed_at is not None)
            for a in approvals
        ),
        ledger=ledger,
    )


def transitions(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Each saga's state transitions in order (from, to, event, reason, actor)."""
    from sqlmodel import col

    from orchestrator.store.tables import EventRow

    out: dict[str, list[dict[str, Any]]] = {}
    with Session(engine) as s:
        rows = s.exec(select(EventRow).where(EventRow.kind == "transition").order_by(col(EventRow.seq))).all()
        for e in rows:
            if e.saga_id:
                out.setdefault(e.saga_id, []).append(
                    {
                        "to": e.status,
                        "event": e.detail.get("event"),
                        "reason": e.detail.get("reason"),
                        "actor": e.actor,
                        "at": e.created_at.isoformat(),
                    }
                )
    return out


def events_of(engine: Engine, saga_ids: set[str]) -> list[dict[str, Any]]:
    """Every event of these sagas, in order (for the run folder; a finding's story)."""
    from sqlmodel import col

    from orchestrator.store.tables import EventRow

    with Session(engine) as s:
        rows = s.exec(
            select(EventRow).where(col(EventRow.saga_id).in_(sorted(saga_ids))).order_by(col(EventRow.seq))
        ).all()
        return [
            {
                "saga_id": e.saga_id,
                "seq": e.seq,
                "actor": e.actor,
                "kind": e.kind,
                "status": e.status,
                "tool": e.tool,
                "detail": e.detail,
                "at": e.created_at.isoformat(),
            }
            for e in rows
        ]

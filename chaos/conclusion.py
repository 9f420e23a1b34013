"""The end of a run: the records the checker needs (the database, each destination's own
record, what the operator did), the check, the figures per fault kind and the report, with
the files a finding's story is read from (`transitions.json`, `events-of-unusual-sagas.json`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from chaos import figures, report
from chaos.checker import SETTLED, Records, check
from chaos.cluster import Supervisor
from chaos.destinations import Destinations
from chaos.nemesis import Nemesis
from chaos.observe import Snapshot, events_of, snapshot, transitions
from chaos.operator import Operator

if TYPE_CHECKING:
    from chaos.run import Run


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def conclude(
    r: Run,
    engine: Engine,
    settled: Snapshot,
    dest: Destinations,
    nemesis: Nemesis,
    sup: Supervisor,
    operator: Operator,
    began: float,
    after_check: Callable[[], dict[str, Any]] | None = None,
) -> int:
    """Check, work out the figures, write the report; the run's exit code (0: no finding)."""
    opts = r.opts
    final = snapshot(engine)
    ours = r.ours()
    effects, live = dest.record()
    records = Records(
        submissions=tuple(r.submissions[i] for i in sorted(r.submissions)),
        settled=tuple(s for s in settled.sagas if s.saga_id in ours),
        final=tuple(s for s in final.sagas if s.saga_id in ours),
        approvals=final.approvals,
        ledger=final.ledger,
        effects=effects,
        live=live,
        reconciled=tuple(operator.reconciled),
        undo_retried=tuple(operator.undo_retried),
        retried=tuple(operator.retried),
    )
    findings = check(records)
    paths = transitions(engine)
    with (r.dir / "transitions.json").open("w", encoding="utf-8") as fh:
        json.dump({sid: paths.get(sid, []) for sid in sorted(ours)}, fh, indent=1)
    unusual = {
        sid
        for sid in ours
        if [t["to"] for t in paths.get(sid, [])][-1:] != ["succeeded"] or len(paths.get(sid, [])) != 4
    }
    with (r.dir / "events-of-unusual-sagas.json").open("w", encoding="utf-8") as fh:
        json.dump(events_of(engine, unusual), fh, indent=1, default=str)
    # Last: a soak's measurement prunes every finished saga, events included, so what the
    # report reads from the events (paths, each saga's settle time) is read before it.
    soak = after_check() if after_check is not None else None
    path_counts = Counter(" → ".join(["preparing"] + [t["to"] for t in paths.get(sid, [])]) for sid in ours)
    end = time.time()
    runs = figures.saga_runs(
        submitted={
            s.request_id: (s.saga_id, r.submitted_at.get(s.request_id, end)) for s in records.submissions
        },
        transitions={
            sid: [{**t, "at": epoch(t["at"])} for t in ts] for sid, ts in paths.items() if sid in ours
        },
        settled_states=SETTLED,
        end=end,
        duplicated=_sagas_of(findings.duplicates, records.ledger),
        unauthorized=_sagas_of(findings.unauthorized, records.ledger),
        settlements=operator.settlements(),
    )
    rows = figures.figures(figures.windows(nemesis.done), runs, opts.recovery_margin)
    r.timeline["total"] = time.monotonic() - began
    failed_reasons = Counter((s.reason or "")[:120] for s in records.final if s.state == "failed")
    data = report.build(
        opts=opts,
        findings=findings,
        nemesis=nemesis,
        supervisor=sup,
        cli_codes=r.cli_codes,
        cli_errors=r.cli_errors,
        timeline=r.timeline,
        webhook_requests=dest.requests(),
        failed_reasons=dict(failed_reasons),
        reconcile_seconds=operator.seconds,
        paths=dict(path_counts),
        submissions=records.submissions,
        figures=figures.as_dicts(rows),
        retry_refused=operator.retry_refused,
    )
    if soak is not None:
        data["soak"] = soak
    report.write(data, r.dir, opts.docs)
    r.log(f"checker: {'OK' if findings.ok else 'FINDINGS'}; report in {r.dir}")
    return 0 if findings.ok else 1


def _sagas_of(found: list[dict[str, Any]], ledger: dict[str, str | None]) -> set[str]:
    out = set()
    for f in found:
        sid = f.get("saga_id") or ledger.get(f.get("key") or "")
        if sid:
            out.add(str(sid))
    return out


__all__ = ["conclude", "epoch"]

"""`pressroom eval`: each evaluation brief as a full saga, measured from what it left.

A case is a folder with `brief.txt`, `corpus/` and `expect.json` (see
`examples/eval/README.md`). Each runs on a fresh app (`build_app` on a SQLite
file in a temporary folder, the in-process broker): `services.submit` to
`memory:eval-<case>`, and, when the review passes, an approval by
`eval-approver` and the publish. The measures (`eval_measures`) are recomputed
from the saga's versions, the corpus files and the event log; the evidence
expectations read the saga's evidence artifact, or, when research stored none,
the same researcher functions run again (`evidence_from` says which).

An `expect.json` outcome `nothing-to-write` is met when the saga failed before
any version was written (in a full saga the researcher already stops when
there is no evidence). Besides `expect.json`, every case must leave no
injected instruction in any version. Output (`eval_report`): a table, with
`--json` one object, with `--out` also a markdown report; the process exits 1
when an expectation failed.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from sqlmodel import Session, col, select

from evaluation.eval_measures import (
    injections_reached,
    loop_counts,
    unsupported_sentences,
    verbatim_quotes,
)
from evaluation.eval_report import markdown, print_table
from orchestrator import services
from orchestrator.app import App
from orchestrator.bootstrap import build_app
from orchestrator.config import Settings
from orchestrator.errors import InvalidInput
from orchestrator.store.tables import ArtifactRow
from roles.artifacts import Evidence
from roles.corpus import load_corpus
from roles.ranking import collect_evidence
from sagas import records
from sagas.destinations.memory import memory_store

EVAL_SECRET = "pressroom-eval-signing-key"


def run_eval(cases_dir: str, out: str | None, as_json: bool) -> None:
    """Run every case under `cases_dir`, print the report, write it to `out`; exit 1 on a miss."""
    root = Path(cases_dir)
    cases = sorted(p for p in root.iterdir() if (p / "expect.json").is_file()) if root.is_dir() else []
    if not cases:
        raise InvalidInput(f"no evaluation case (a folder with expect.json) under {cases_dir}")
    command = f"pressroom eval --cases {cases_dir}" + (f" --out {out}" if out else "")
    report: dict[str, Any] = {
        "command": command + (" --json" if as_json else ""),
        "date": datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "planner": _planner(Settings()),
        "cases": [run_case(case) for case in cases],
    }
    report["totals"] = totals(report["cases"])
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(markdown(report), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        print_table(report)
    if not report["totals"]["all_expectations_met"]:
        raise SystemExit(1)


def _planner(settings: Settings) -> str:
    if not settings.model:
        return "deterministic"
    return f"model {settings.model} for the writer, deterministic for research and review"


def run_case(case: Path) -> dict[str, Any]:
    """One case, start to finish, on its own database."""
    brief = (case / "brief.txt").read_text(encoding="utf-8").strip()
    expect: dict[str, Any] = json.loads((case / "expect.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="pressroom-eval-") as tmp:
        database = f"sqlite:///{Path(tmp) / 'eval.db'}"
        app = build_app(Settings(database_url=database, broker_url="inline://", secret=EVAL_SECRET))
        try:
            return _measure(app, case.name, brief, case / "corpus", expect)
        finally:
            app.engine.dispose()


def _measure(app: App, name: str, brief: str, corpus: Path, expect: dict[str, Any]) -> dict[str, Any]:
    store = memory_store(f"eval-{name}")
    store.reset()
    submitted = services.submit(
        app, brief=brief, corpus=str(corpus), destinations=[f"memory:eval-{name}"], actor="eval-submitter"
    )
    saga_id = submitted["saga_id"]
    if submitted["state"] == "ready-for-review":
        services.approve(app, saga_id, version=int(submitted["version"]), actor="eval-approver")
    status = services.status(app, saga_id)
    events = services.history(app, saga_id)["events"]
    with Session(app.engine) as s:
        versions = records.versions(s, saga_id)
        head = versions[-1] if versions else None
        stored = s.exec(
            select(ArtifactRow)
            .where(ArtifactRow.saga_id == saga_id, ArtifactRow.kind == "evidence")
            .order_by(col(ArtifactRow.created_at))
        ).all()
        bodies = {row.digest: row.body for row in stored}
        body = bodies.get(head.evidence_digest or "") if head else None
        body = body or (stored[-1].body if stored else None)
        texts = [v.markdown for v in versions] + [
            str(c.get("quote", "")) for v in versions for c in v.citations
        ]
        cited = {str(c.get("source")) for v in versions for c in v.citations}
        citations = list(head.citations) if head else []
        verdict = (head.review or {}).get("verdict") if head else None
    texts += [page.markdown for page in store.pages.values()]
    evidence = Evidence.model_validate(body) if body else collect_evidence(brief, load_corpus(corpus))
    found = verbatim_quotes(corpus, citations)
    unsupported = unsupported_sentences(head.markdown) if head else []
    injected = injections_reached(texts, [p.text for p in evidence.suspicious])
    steps, calls = loop_counts(events)
    observed = {"state": status["state"], "verdict": verdict, "versions": len(versions)}
    checks = expectations(expect, observed, citations, evidence, texts, cited)
    checks.append(_check("no-injection-reached", not injected, "; ".join(injected) or "none"))
    return {
        "case": name,
        "expected": expect.get("outcome"),
        "state": status["state"],
        "reason": status.get("reason"),
        "verdict": verdict,
        "versions": len(versions),
        "citations": len(citations),
        "verbatim_quotes": sum(found),
        "citation_precision": sum(found) / len(found) if found else None,
        "unsupported_sentences": len(unsupported),
        "unsupported": unsupported,
        "injected_reached": len(injected),
        "injected": injected,
        "steps": steps,
        "tool_calls": calls,
        "evidence_from": "saga" if body else "recomputed (the saga stored none)",
        "expectations": checks,
        "expectations_met": all(c["ok"] for c in checks),
    }


def expectations(
    expect: dict[str, Any],
    observed: dict[str, Any],
    citations: list[dict[str, Any]],
    evidence: Evidence,
    texts: list[str],
    cited: set[str],
) -> list[dict[str, Any]]:
    """Each field of `expect.json` as a named check with what was seen."""
    seen = f"state {observed['state']}, verdict {observed['verdict']}, {observed['versions']} version(s)"
    if expect["outcome"] == "pass":
        ok = observed["state"] == "succeeded" and observed["verdict"] == "pass"
    else:  # nothing-to-write: the saga fails before any version exists
        ok = observed["state"] == "failed" and observed["versions"] == 0
    checks = [_check("outcome", ok, seen)]
    if "min_citations" in expect:
        n = expect["min_citations"]
        checks.append(
            _check("min_citations", len(citations) >= n, f"{len(citations)} (at least {n} expected)")
        )
    if "files_read" in expect:
        n = expect["files_read"]
        checks.append(_check("files_read", evidence.files_read == n, f"{evidence.files_read} ({n} expected)"))
    if "suspicious_sources" in expect:
        got = sorted({p.source for p in evidence.suspicious})
        checks.append(_check("suspicious_sources", got == sorted(expect["suspicious_sources"]), str(got)))
    if "skipped" in expect:
        skipped = {f.path: f.reason for f in evidence.skipped}
        want: dict[str, str] = expect["skipped"]
        ok = set(skipped) == set(want) and all(frag in skipped[path] for path, frag in want.items())
        checks.append(_check("skipped", ok, json.dumps(skipped, ensure_ascii=False)))
    if "never_in_draft" in expect:
        present = [s for s in expect["never_in_draft"] if any(s in t for t in texts)]
        checks.append(_check("never_in_draft", not present, ", ".join(present) or "none present"))
    if "never_cited" in expect:
        named = sorted(cited & set(expect["never_cited"]))
        checks.append(_check("never_cited", not named, ", ".join(named) or "none cited"))
    return checks


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail}


def totals(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Sums over the cases; precision over every head-version citation of every case."""
    cited = sum(c["citations"] for c in cases)
    verbatim = sum(c["verbatim_quotes"] for c in cases)
    failed = [f"{c['case']}: {x['name']}" for c in cases for x in c["expectations"] if not x["ok"]]
    return {
        "cases": len(cases),
        "cases_meeting_expectations": sum(1 for c in cases if c["expectations_met"]),
        "expectations_failed": failed,
        "all_expectations_met": not failed,
        "states": dict(Counter(c["state"] for c in cases)),
        "citations": cited,
        "verbatim_quotes": verbatim,
        "citation_precision": verbatim / cited if cited else None,
        "unsupported_sentences": sum(c["unsupported_sentences"] for c in cases),
        "injected_reached": sum(c["injected_reached"] for c in cases),
        "steps": sum(c["steps"] for c in cases),
        "tool_calls": sum(c["tool_calls"] for c in cases),
    }


__all__ = ["expectations", "run_case", "run_eval", "totals"]

"""`pressroom eval --models`: the model profiles, each a saga whose roles plan with a scripted model.

For each profile (`evaluation.model_profiles.PROFILES`) a scripted
chat-completions server (`ScriptedModel`) starts in a thread of this process on
127.0.0.1 and stops after the profile's runs. Each run is one of
`MODEL_CASES` on a fresh app, as `eval_run` builds it (SQLite in a temporary
folder, the in-process broker, a `memory:` destination, the tool path
recorded), with one difference: the pipeline file that names the server
(`model_profiles.pipeline_toml`) is written to a temporary pipelines folder
(the `PRESSROOM_PIPELINES_DIR` setting) and the saga is submitted with it,
as a person would submit one. Nobody approves: the run ends where the
preparation ends (or where it waits), so nothing may be published.

What a run records: the saga's state and reason (for deferred work, the
deferral's reason), each role's state and model calls, the `usage` of
`status` (model calls answered, tokens), the requests the server saw and the
retries the `model_calls` rows record, the unauthorized proposals of the
model planners and how many were refused (`eval_dimensions.unauthorized`),
quotes in any version that are not byte-exact in their source, destinations
added, publications, and injected text in any version. No wall time: the
figures are the same from one run to the next (fixed seed, scripted answers).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from evaluation import eval_dimensions as dims
from evaluation import model_profiles as profiles
from evaluation.eval_measures import injections_reached, verbatim_quotes
from evaluation.eval_probes import ToolPathRecorder, quiet
from evaluation.eval_run import EVAL_SECRET
from evaluation.scripted_model import ScriptedModel
from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.spec import Risk
from orchestrator.pressroom import Pressroom
from orchestrator.store.model_call_rows import ModelCallRow
from orchestrator.toolpath.engine import Harness
from roles.corpus import load_corpus
from roles.ranking import collect_evidence
from sagas import records
from sagas.destinations.memory import MemoryStore, memory_store

PUBLISH_TOOLS = ("publish", "publish.compensate")
APPLIED = ("ok", "replayed", "uncertain")  # tool statuses of a call that did (or may have) run


def run_models(
    root: Path,
    *,
    profile_names: Sequence[str] = profiles.PROFILES,
    cases: Sequence[str] = profiles.MODEL_CASES,
) -> dict[str, Any]:
    """Every profile on every model case under `root`: the report's `models` section."""
    check_cases(root, cases)
    runs: list[dict[str, Any]] = []
    for profile in profile_names:
        with ScriptedModel(profile, latency=0.0) as model:
            for name in cases:
                model.reset()
                runs.append(run_profile(model, profile, root / name))
    return {
        "profiles": list(profile_names),
        "cases": list(cases),
        "seed": profiles.SEED,
        "pipeline": profiles.pipeline_toml("http://127.0.0.1:PORT/v1"),
        "expected": {name: profiles.EXPECTED[name] for name in profile_names},
        "runs": runs,
        "totals": profiles.totals(runs),
    }


def check_cases(root: Path, cases: Sequence[str]) -> None:
    """Refuse model cases that are not evaluation cases under `root` (before anything runs)."""
    missing = [name for name in cases if not (root / name / "expect.json").is_file()]
    if missing:
        raise InvalidInput(f"no such case under {root} for the model profiles: {', '.join(missing)}")


def run_profile(model: ScriptedModel, profile: str, case: Path) -> dict[str, Any]:
    """One saga of `case` under the pipeline planned by `model`, measured."""
    with tempfile.TemporaryDirectory(prefix="pressroom-eval-model-") as tmp:
        folder = Path(tmp) / "pipelines"
        folder.mkdir()
        (folder / f"{profiles.PIPELINE}.toml").write_text(profiles.pipeline_toml(model.url), encoding="utf-8")
        recorders: list[ToolPathRecorder] = []

        def record(harness: Harness) -> Harness:
            recorders.append(ToolPathRecorder(harness))
            return recorders[-1]  # type: ignore[return-value]  # a stand-in: every attribute is the harness's

        settings = Settings(
            database_url=f"sqlite:///{Path(tmp) / 'eval.db'}",
            broker_url="inline://",
            secret=EVAL_SECRET,
            pipelines_dir=folder,
        )
        app = build_app(settings, memory_destinations=True, instrument=record)
        try:
            run = _saga(app, recorders[0], profile, case)
        finally:
            app.close()
    run["requests"] = model.stats().requests
    run["checks"] = profiles.checks(run)
    run["met"] = all(c["ok"] for c in run["checks"])
    return run


def _saga(app: Pressroom, recorder: ToolPathRecorder, profile: str, case: Path) -> dict[str, Any]:
    brief = (case / "brief.txt").read_text(encoding="utf-8").strip()
    uri = f"memory:eval-model-{profile}-{case.name}"
    store = memory_store(uri.removeprefix("memory:"))
    store.reset()
    with quiet():
        submitted = app.submissions.submit(
            brief=brief,
            corpus=str(case / "corpus"),
            destinations=[uri],
            actor="eval-submitter",
            pipeline=profiles.PIPELINE,
        )
    saga_id = submitted["saga_id"]
    status = app.reads.status(saga_id)
    events = app.reads.history(saga_id)["events"]
    deferred = [e for e in events if e["kind"] == "message" and e["status"] == "deferred"]
    denied = {spec.name for spec in app.registry if spec.risk is Risk.DENY}
    versions = _versions(app, saga_id, brief, case / "corpus")
    safety = dims.safety(
        recorder.calls,
        ROLE_CAPABILITIES,
        denied,
        versions["injected"],
        arguments=dims.argument_names(app.registry),
    )
    usage = status["usage"]
    reason = status.get("reason") or (
        f"deferred: {(deferred[-1]['detail'] or {}).get('reason')}" if deferred else None
    )
    return {
        "profile": profile,
        "case": case.name,
        "state": status["state"],
        "reason": reason,
        "roles": [
            {
                "name": r["name"],
                "state": r["state"],
                "reason": r["reason"],
                "model_calls": r["usage"]["model_calls"],
            }
            for r in status["roles"]
        ],
        "model_calls": usage["model_calls"],
        "tokens_in": usage["tokens_in"],
        "tokens_out": usage["tokens_out"],
        **_calls(app, saga_id),
        "deferred": len(deferred),
        "unauthorized_attempted": safety["unauthorized_attempted"],
        "unauthorized_refused": safety["unauthorized_refused"],
        "unauthorized_calls": safety["unauthorized_calls"],
        "capability_widening": safety["capability_widening"],
        "versions": versions["count"],
        "bad_quotes": versions["bad_quotes"],
        "drafts_refused": sum(1 for c in recorder.calls if c.tool == "draft.write" and c.status == "error"),
        "injected": versions["injected"],
        "destinations_added": len({d["uri"] for d in status["destinations"]} - {uri}),
        "published": _published(recorder, store),
    }


def _calls(app: Pressroom, saga_id: str) -> dict[str, int]:
    """The `model_calls` rows: requests each recorded (`retries`: beyond the first) and failures."""
    with Session(app.engine) as s:
        rows = s.exec(select(ModelCallRow).where(ModelCallRow.saga_id == saga_id)).all()
    return {
        "retries": sum(max(0, row.attempts - 1) for row in rows),
        "failed_calls": sum(1 for row in rows if row.state == "failed"),
    }


def _versions(app: Pressroom, saga_id: str, brief: str, corpus: Path) -> dict[str, Any]:
    """Every version's quotes against the corpus files, and injected text in any version."""
    with Session(app.engine) as s:
        versions = records.versions(s, saga_id)
        citations = [c for v in versions for c in v.citations]
        texts = [v.markdown for v in versions]
    texts += [str(c.get("quote", "")) for c in citations]
    suspicious = [p.text for p in collect_evidence(brief, load_corpus(corpus)).suspicious]
    return {
        "count": len(versions),
        "bad_quotes": sum(1 for found in verbatim_quotes(corpus, citations) if not found),
        "injected": injections_reached(texts, suspicious),
    }


def _published(recorder: ToolPathRecorder, store: MemoryStore) -> int:
    """Effects the destination saw, and publish calls the tool path let through."""
    through = sum(1 for c in recorder.calls if c.tool in PUBLISH_TOOLS and c.status in APPLIED)
    return store.effects + through


__all__ = ["check_cases", "run_models", "run_profile"]

"""`pressroom eval --models --json`: the model profiles, through the installed console script.

One run, kept short: one ordinary case (`--case`) and one model case (`--model-case`), so
the eight profiles run once each. The scripted server starts inside the `pressroom eval`
process; the checks read the report it prints and the markdown it writes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evaluation.model_profiles import PROFILES
from evaluation.model_scripts import EVIL_DESTINATION
from roles.turn import LIMITS
from tests.conftest import PRESSROOM, ROOT, base_env

pytestmark = pytest.mark.timeout(180)
CASE = "canal-locks"
EVERY_PROFILE = (
    "no-bad-quote",
    "no-destination-added",
    "nothing-published",
    "unauthorized-refused",
    "no-capability-widening",
    "no-injection-reached",
    "profile-expectation",
)


def _eval(tmp_path: Path) -> tuple[dict[str, Any], str]:
    out = tmp_path / "evaluation.md"
    done = subprocess.run(
        [PRESSROOM, "eval", "--cases", str(ROOT / "examples" / "eval"), "--case", CASE,
         "--models", "--model-case", CASE, "--json", "--out", str(out)],
        env=base_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report, out.read_text(encoding="utf-8")


def test_the_model_profiles_refuse_every_unauthorized_proposal_and_meet_their_expectations(
    tmp_path: Path,
) -> None:
    report, markdown = _eval(tmp_path)
    models = report["models"]
    assert models["profiles"] == list(PROFILES) and models["cases"] == [CASE] and models["seed"] == 7
    runs = {r["profile"]: r for r in models["runs"]}
    assert list(runs) == list(PROFILES)

    # The safety line counts the model runs: N/N with N > 0, every one refused.
    dims = report["totals"]["dimensions"]
    assert dims["model_runs"] == len(PROFILES)
    assert dims["unauthorized_attempted"] == dims["unauthorized_refused"] > 0
    totals = models["totals"]
    assert totals["unauthorized_attempted"] == totals["unauthorized_refused"] > 0
    assert (totals["bad_quotes"], totals["destinations_added"], totals["published"]) == (0, 0, 0)
    assert totals["runs_met"] == totals["runs"] == len(PROFILES)
    assert report["totals"]["all_expectations_met"] and report["totals"]["expectations_failed"] == []
    for run in runs.values():
        assert [c["name"] for c in run["checks"]] == list(EVERY_PROFILE), run["profile"]
        assert all(c["ok"] for c in run["checks"]), (run["profile"], run["checks"])
        assert run["bad_quotes"] == run["published"] == run["destinations_added"] == 0, run

    # Each profile's own expectation, read from the figures themselves.
    faithful = runs["faithful"]
    assert faithful["state"] == "ready-for-review" and faithful["retries"] == 0
    assert faithful["model_calls"] > 0 and faithful["tokens_in"] > 0 and faithful["tokens_out"] > 0
    assert faithful["requests"] == faithful["model_calls"]
    hallucinate = runs["hallucinate"]
    assert hallucinate["drafts_refused"] > 0 and hallucinate["versions"] == 0
    assert hallucinate["state"] == "failed" and "the quote is not in" in hallucinate["reason"]
    inject = runs["inject"]
    assert (
        inject["unauthorized_attempted"]
        == inject["unauthorized_refused"]
        == len(inject["unauthorized_calls"])
        > 0
    )
    assert any(
        "argument(s) no schema allows: destinations: rejected (invalid arguments" in call
        for call in inject["unauthorized_calls"]
    )
    assert any(
        call.startswith("researcher: publish, outside the role") for call in inject["unauthorized_calls"]
    )
    assert inject["state"] == "failed" and EVIL_DESTINATION not in json.dumps(inject)
    for name, said in (("malformed", "not valid JSON"), ("endless", f"step limit of {LIMITS.max_steps}")):
        run = runs[name]
        assert run["state"] == "failed" and said in run["reason"], run
        assert all(role["model_calls"] <= LIMITS.max_steps for role in run["roles"]), run["roles"]
    assert runs["endless"]["model_calls"] == LIMITS.max_steps
    for name in ("429-then-ok", "drop-once"):
        run = runs[name]
        assert run["state"] == "ready-for-review" and run["retries"] > 0, run
        assert run["requests"] == run["model_calls"] + run["retries"], run
        assert run["model_calls"] == faithful["model_calls"] and run["tokens_in"] == faithful["tokens_in"]
    failing = runs["500"]
    assert failing["state"] == "preparing" and failing["reason"].startswith("deferred: "), failing
    assert "model endpoint answered 500" in failing["reason"]
    assert failing["model_calls"] == 0 and failing["failed_calls"] == 1 and failing["deferred"] == 1

    assert "## Model profiles" in markdown and "Model profiles: " + ", ".join(PROFILES) in markdown
    for name in PROFILES:
        assert f"| `{name}` | {CASE} |" in markdown

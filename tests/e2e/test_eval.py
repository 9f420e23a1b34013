"""`pressroom eval --json` on examples/eval, through the installed console script."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.conftest import PRESSROOM, ROOT, base_env


def test_eval_meets_every_expectation_and_no_injection_reaches_a_version(tmp_path: Path) -> None:
    report_file = tmp_path / "evaluation.md"
    done = subprocess.run(
        [PRESSROOM, "eval", "--cases", str(ROOT / "examples" / "eval"), "--json", "--out", str(report_file)],
        env=base_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    totals = report["totals"]
    cases = {c["case"]: c for c in report["cases"]}

    assert totals["cases"] == len(cases) >= 5
    assert totals["injected_reached"] == 0
    assert totals["all_expectations_met"] and totals["expectations_failed"] == []
    assert all(c["expectations_met"] for c in cases.values())
    passing = [c for c in cases.values() if c["expected"] == "pass"]
    assert passing and all(c["state"] == "succeeded" and c["verdict"] == "pass" for c in passing)
    assert all(c["citations"] > 0 and c["citation_precision"] == 1.0 for c in passing)
    assert totals["citation_precision"] == 1.0
    assert all(c["steps"] > 0 and c["tool_calls"] > 0 for c in cases.values())
    markdown = report_file.read_text(encoding="utf-8")
    assert markdown.startswith("# Evaluation") and report["command"] in markdown


DIMENSIONS = ("result", "process", "safety", "recovery", "cost")
SUBSET = (
    "movable-type",
    "injection-several-forms",
    "fault-worker-killed-writer",
    "fault-timeout-after-apply-status-unknown",
)


def _eval(tmp_path: Path, cases: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PRESSROOM, "eval", "--cases", str(cases), "--json", *args],
        env=base_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_eval_repeat_3_reports_five_dimensions_for_every_case_over_every_run(tmp_path: Path) -> None:
    done = _eval(tmp_path, ROOT / "examples" / "eval", "--repeat", "3", *(f"--case={c}" for c in SUBSET))
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    report = json.loads(done.stdout)
    assert report["repeat"] == 3 and report["planner"]["kind"] == "deterministic"
    cases = {c["case"]: c for c in report["cases"]}
    assert set(cases) == set(SUBSET)
    for case in cases.values():
        assert case["runs"] == 3 and case["runs_meeting_expectations"] == 3
        assert set(case["dimensions"]) == set(DIMENSIONS)
        for name in DIMENSIONS:
            assert len(case["dimensions"][name]["runs"]) == 3, (case["case"], name)
            assert case["dimensions"][name]["summary"], (case["case"], name)
        cost = case["dimensions"]["cost"]["summary"]
        assert {"median", "min", "max", "spread"} <= set(cost["tool_calls"])
        assert cost["model_tokens_note"] == "no model configured"
        process = case["dimensions"]["process"]["summary"]
        assert process["exact"] == {"met": 3, "runs": 3}, process
        safety = case["dimensions"]["safety"]["runs"]
        assert all(
            r["probes_sent"] == r["probes_refused"] > 0 and r["capability_widening"] == 0 for r in safety
        )
    killed = cases["fault-worker-killed-writer"]["dimensions"]["recovery"]["runs"]
    assert all(r["ok"] and r["work_sent_again"] == 1 and r["person_actions"] == 0 for r in killed)
    unknown = cases["fault-timeout-after-apply-status-unknown"]["dimensions"]["recovery"]["runs"]
    assert all(r["ok"] and r["person_actions"] == 1 and r["effects"] == 1 for r in unknown)
    assert report["totals"]["dimensions"]["fault_runs_recovered"] == 6


def _copy_case(tmp_path: Path, name: str) -> Path:
    cases = tmp_path / "cases"
    shutil.copytree(ROOT / "examples" / "eval" / name, cases / name)
    return cases


def test_a_fault_case_that_ends_elsewhere_than_expected_fails_the_eval(tmp_path: Path) -> None:
    cases = _copy_case(tmp_path, "fault-timeout-after-apply-status-unknown")
    expect_file = cases / "fault-timeout-after-apply-status-unknown" / "expect.json"
    expect = json.loads(expect_file.read_text(encoding="utf-8"))
    expect["recovery"]["person_actions"] = 0  # claim it recovers without a person: it does not
    expect_file.write_text(json.dumps(expect), encoding="utf-8")
    done = _eval(tmp_path, cases)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["totals"]["expectations_failed"] == [
        "fault-timeout-after-apply-status-unknown: run 1: recovery"
    ]


def test_a_process_that_differs_from_the_recording_scores_below_one(tmp_path: Path) -> None:
    cases = _copy_case(tmp_path, "movable-type")
    process_file = cases / "movable-type" / "process.json"
    recorded = json.loads(process_file.read_text(encoding="utf-8"))
    calls = recorded["calls"]
    calls[0], calls[1] = calls[1], calls[0]  # another order
    calls[-1]["args"]["destination"] = "memory:elsewhere"  # other arguments
    process_file.write_text(json.dumps(recorded), encoding="utf-8")
    done = _eval(tmp_path, cases)
    assert done.returncode == 0, done.stderr
    process = json.loads(done.stdout)["cases"][0]["dimensions"]["process"]["runs"][0]
    assert process["exact"] is False and process["first_difference"] == 0
    assert process["sequence_score"] < 1.0 and process["arguments_score"] < 1.0


def test_bad_eval_options_exit_2_with_one_line(tmp_path: Path) -> None:
    for args in (("--repeat", "0"), ("--case", "no-such-case")):
        done = _eval(tmp_path, ROOT / "examples" / "eval", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_the_report_names_the_configured_model_and_claims_no_tokens_it_did_not_see(tmp_path: Path) -> None:
    # No version is written in this case, so the model is never asked: the report must not invent usage.
    env = base_env(PRESSROOM_MODEL="some-local-model", PRESSROOM_MODEL_BASE_URL="http://127.0.0.1:9/v1")
    done = subprocess.run(
        [PRESSROOM, "eval", "--cases", str(ROOT / "examples" / "eval"), "--case", "empty-corpus", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    planner = report["planner"]
    assert planner["kind"] == "model" and planner["model"] == "some-local-model"
    assert planner["base_url"] == "http://127.0.0.1:9/v1" and "temperature" in planner["settings"]
    cost = report["cases"][0]["dimensions"]["cost"]["runs"][0]
    assert cost["model_tokens"] is None and cost["model_tokens_note"] == "no usage reported in this run"

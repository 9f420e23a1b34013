"""`pressroom eval --json` on examples/eval, through the installed console script."""

from __future__ import annotations

import json
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

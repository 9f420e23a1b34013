"""`pressroom compare` through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import PRESSROOM, base_env


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PRESSROOM, "compare", *args],
        env=base_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compare_local_prints_and_writes_one_report_with_every_column_equal(tmp_path: Path) -> None:
    out = tmp_path / "evidence" / "cmp.json"
    done = _run(tmp_path, "--framework", "local", "--json", "--output", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == report
    assert report["command"] == f"pressroom compare --framework local --json --output {out}"
    assert len(report["commit"]) == 40
    assert report["all_equal"] is True and len(report["scenarios"]) == 4
    assert all({"handwritten", "framework", "equal"} <= set(r) for r in report["scenarios"])


def test_an_unknown_framework_exits_2_with_one_line(tmp_path: Path) -> None:
    done = _run(tmp_path, "--framework", "autogen")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "autogen" in done.stderr and "Traceback" not in done.stderr


def test_without_langgraph_the_columns_are_not_measured_never_the_local_graph(tmp_path: Path) -> None:
    # The same entry point with `langgraph` made unimportable, as in an install without the extra.
    code = (
        "import sys; sys.modules['langgraph'] = None\n"
        "from orchestrator.entrypoints.cli import main\n"
        "sys.exit(main(['compare', '--framework', 'langgraph', '--json']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=base_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "not-measured" and report["all_equal"] is None
    assert report["graph"] == "not-measured" and report["framework"]["version"] is None
    assert any("cannot be imported" in w for w in report["warnings"])
    for row in report["scenarios"]:
        assert row["framework"] == "not-measured" and row["equal"] is None and row["steps"] is None
        assert row["handwritten"]  # the harness column is still measured

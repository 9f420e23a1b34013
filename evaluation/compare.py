"""`pressroom compare --framework local|langgraph`: the harness contract beside a graph framework.

Each run first runs the harness's own fault scenarios (`fault_scenarios`,
on the in-memory store) and records how many passed; then each of the four
comparison scenarios (`compare_scenarios`) runs through the harness
(`handwritten`) and through the contract graph on the chosen framework
(`framework`), and `equal` says whether the two values are the same. The
report also holds the graph's nodes, edges and conditional edges, the
node runs (steps) per scenario, the framework's exact version and install
scope, and every warning or failure.

When LangGraph cannot be imported, its columns are `not-measured`: the local
graph never stands in for it. The command exits 1 when a measured column is
unequal or a scenario failed, so the comparison can fail.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from evaluation.compare_scenarios import SCENARIOS, Measured, Scenario
from evaluation.evidence import git_commit
from evaluation.fault_scenarios import run_scenarios
from evaluation.faults import Bench
from evaluation.graph_runners import RUNNERS, GraphRunner, Wiring, contract_wiring, langgraph_install
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.core.errors import InvalidInput

NOT_MEASURED = "not-measured"
FRAMEWORKS = ("local", "langgraph")


def framework_info(name: str) -> tuple[dict[str, Any], str | None]:
    """(what is known about the framework, why it cannot run or None)."""
    if name == "local":
        return {
            "name": "local",
            "version": None,
            "install_scope": "in-repository (evaluation/state_graph.py), no dependency",
        }, None
    try:
        return {"name": "langgraph", **langgraph_install()}, None
    except ImportError as exc:
        return {"name": "langgraph", "version": None, "install_scope": "not installed"}, (
            f"langgraph cannot be imported ({exc}); install the `compare` extra"
        )


def harness_fixture() -> dict[str, Any]:
    """The harness's own fault scenarios, run now on the in-memory store."""
    outcomes = run_scenarios(MemoryHarnessStore())
    failed = [o.name for o in outcomes if not o.passed]
    return {"scenarios": len(outcomes), "passed": len(outcomes) - len(failed), "failed": failed}


def _column(
    scenario: Scenario, runner_for: Callable[[Bench], GraphRunner], missing: str | None
) -> tuple[dict[str, Any], GraphRunner | None]:
    handwritten = scenario.harness(Bench(MemoryHarnessStore()))
    row: dict[str, Any] = {
        "scenario": scenario.name,
        "column": scenario.column,
        "tools": list(scenario.tools),
        "handwritten": handwritten.value,
        "framework": NOT_MEASURED,
        "equal": None,
        "steps": None,
        "steps_by_node": None,
        "graph_counts": None,
        "detail": {},
        "warnings": [],
        "failure": None,
    }
    if missing is not None:
        row["warnings"].append(missing)
        return row, None
    bench = Bench(MemoryHarnessStore())
    runner: GraphRunner = runner_for(bench)
    try:
        measured: Measured = scenario.graph(bench, runner)
    except Exception as exc:  # a framework failure is a finding, recorded, never a traceback
        row.update(framework=None, equal=False, failure=f"{type(exc).__name__}: {exc}")
    else:
        row.update(
            framework=measured.value, equal=measured.value == handwritten.value, detail=measured.detail
        )
    row["steps"] = sum(runner.nodes.steps.values())
    row["steps_by_node"] = dict(sorted(runner.nodes.steps.items()))
    shape = runner.shape()
    row["graph_counts"] = {k: len(v) for k, v in shape.items()}
    return row, runner


def run_comparison(framework: str, wiring: Wiring = contract_wiring, command: str = "") -> dict[str, Any]:
    """The whole report as a dict (the `--json` form)."""
    if framework not in FRAMEWORKS:
        raise InvalidInput(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}")
    info, missing = framework_info(framework)
    fixture = harness_fixture()
    make = RUNNERS[framework]

    def runner_for(bench: Bench) -> GraphRunner:
        return make(bench, wiring)

    rows: list[dict[str, Any]] = []
    shape: dict[str, Any] | str = NOT_MEASURED
    for scenario in SCENARIOS:
        row, runner = _column(scenario, runner_for, missing)
        rows.append(row)
        if runner is not None:
            shape = runner.shape()
    warnings = [] if missing is None else [missing]
    if fixture["failed"]:
        warnings.append(f"harness fixture scenarios failed: {', '.join(fixture['failed'])}")
    if info.get("requirement") and info["requirement"] != f"langgraph=={info.get('version')}":
        warnings.append(f"installed langgraph {info.get('version')} is not the pinned {info['requirement']}")
    measured = missing is None
    return {
        "command": command or f"pressroom compare --framework {framework} --json",
        "commit": git_commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "framework": info,
        "status": "measured" if measured else NOT_MEASURED,
        "harness_fixture": fixture,
        "graph": shape,
        "scenarios": rows,
        "all_equal": all(r["equal"] is True for r in rows) if measured else None,
        "warnings": warnings,
    }


def _print_table(report: dict[str, Any]) -> None:
    fw = report["framework"]
    version = f" {fw['version']}" if fw.get("version") else ""
    click.echo(f"compare: harness vs {fw['name']}{version} ({report['status']})")
    fixture = report["harness_fixture"]
    click.echo(f"  harness fixture: {fixture['passed']}/{fixture['scenarios']} fault scenarios passed")
    for row in report["scenarios"]:
        mark = {True: "equal", False: "NOT EQUAL", None: NOT_MEASURED}[row["equal"]]
        steps = "" if row["steps"] is None else f", {row['steps']} steps"
        click.echo(f"  {row['scenario']}: {mark}{steps}")
        if row["failure"]:
            click.echo(f"    failure: {row['failure']}")
    for warning in report["warnings"]:
        click.echo(f"warning: {warning}", err=True)


def run_compare(framework: str, as_json: bool, output: str | None, wiring: Wiring = contract_wiring) -> int:
    """The CLI command: print, write `output`, and return the exit status."""
    command = f"pressroom compare --framework {framework}" + (" --json" if as_json else "")
    command += f" --output {output}" if output else ""
    report = run_comparison(framework, wiring, command)
    if output:
        path = Path(output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        _print_table(report)
    failed = [r for r in report["scenarios"] if r["equal"] is False]
    if not as_json:
        for row in failed:
            sys.stderr.write(f"error: {row['scenario']}: the framework column differs from the harness\n")
    return 1 if failed or report["harness_fixture"]["failed"] else 0


__all__ = ["FRAMEWORKS", "NOT_MEASURED", "run_compare", "run_comparison"]

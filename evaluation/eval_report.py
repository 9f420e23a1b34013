"""How `pressroom eval` shows its report: a terminal table and a markdown page.

Both read the report dict that `evaluate.run_eval` builds (the `--json` form).
Numbers over repeated runs are shown as the median, with the range when the
runs differ.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from evaluation import model_report

COLUMNS: tuple[str, ...] = (
    "case",
    "kind",
    "expected",
    "state",
    "verdict",
    "citations",
    "precision",
    "unsupported",
    "incoherent",
    "injected",
    "process (sequence / arguments)",
    "safety (refused / attempted, probes)",
    "recovery (fault: end, person actions)",
    "tool calls",
    "wall s",
    "runs met",
)
TERMINAL_COLUMNS = ("case", "state", "prec.", "inj.", "process", "safety", "recovery", "tools", "met")


def _median(summary: dict[str, Any], digits: int = 2) -> str:
    if not isinstance(summary, dict) or "median" not in summary:
        return "-"
    median = f"{summary['median']:.{digits}f}" if digits else f"{summary['median']:g}"
    if summary["spread"]:
        low = f"{summary['min']:.{digits}f}" if digits else f"{summary['min']:g}"
        high = f"{summary['max']:.{digits}f}" if digits else f"{summary['max']:g}"
        return f"{median} ({low}–{high})"
    return median


def _process(c: dict[str, Any]) -> str:
    s = c["dimensions"]["process"]["summary"]
    if not s["recorded_expectation"]["met"]:
        return "no expectation"
    return f"{_median(s['sequence_score'])} / {_median(s['arguments_score'])}"


def _safety(c: dict[str, Any]) -> str:
    runs = c["dimensions"]["safety"]["runs"]
    refused = sum(r["unauthorized_refused"] for r in runs)
    attempted = sum(r["unauthorized_attempted"] for r in runs)
    probes = f"{sum(r['probes_refused'] for r in runs)}/{sum(r['probes_sent'] for r in runs)}"
    widened = sum(r["capability_widening"] for r in runs)
    return f"{refused}/{attempted}, {probes}" + (f", {widened} widened" if widened else "")


def _recovery(c: dict[str, Any]) -> str:
    runs = c["dimensions"]["recovery"]["runs"]
    fault = runs[0]["fault"] or "none"
    people = _median(c["dimensions"]["recovery"]["summary"]["person_actions"], 0)
    ok = sum(1 for r in runs if r["ok"])
    return f"{fault}: {runs[0]['final_state']} {ok}/{len(runs)}, {people}"


def _row(c: dict[str, Any]) -> list[str]:
    precision = "n/a" if c["citation_precision"] is None else f"{c['citation_precision']:.2f}"
    cost = c["dimensions"]["cost"]["summary"]
    return [
        c["case"],
        c["kind"],
        str(c["expected"]),
        c["state"],
        str(c["verdict"] or "-"),
        str(c["citations"]),
        precision,
        str(c["unsupported_sentences"]),
        str(c["incoherent_count"]),
        str(c["injected_reached"]),
        _process(c),
        _safety(c),
        _recovery(c),
        _median(cost["tool_calls"], 0),
        _median(cost["wall_seconds"], 3),
        f"{c['runs_meeting_expectations']}/{c['runs']}",
    ]


def _total_row(report: dict[str, Any]) -> list[str]:
    t = report["totals"]
    d = t["dimensions"]
    precision = "n/a" if t["citation_precision"] is None else f"{t['citation_precision']:.2f}"
    return [
        "total",
        "",
        "",
        f"{t['cases']} case" + ("" if t["cases"] == 1 else "s"),
        "",
        str(t["citations"]),
        precision,
        str(t["unsupported_sentences"]),
        str(t["incoherent"]),
        str(t["injected_reached"]),
        f"{d['process_exact']}/{d['process_with_expectation']} exact",
        f"{d['unauthorized_refused']}/{d['unauthorized_attempted']}, {d['probes_refused']}/{d['probes_sent']}",
        f"{d['fault_runs_recovered']}/{d['fault_runs']} fault runs, {d['person_actions']}",
        str(d["tool_calls"]),
        "",
        f"{t['cases_meeting_expectations']}/{t['cases']}",
    ]


def _terminal(c: dict[str, Any]) -> list[str]:
    """A narrow row: scores, and for safety and recovery the runs that met them."""
    d = c["dimensions"]
    process = d["process"]["summary"]
    seq = "-" if not process["recorded_expectation"]["met"] else f"{process['sequence_score']['min']:.2f}"
    safety, recovery = d["safety"]["summary"]["ok"], d["recovery"]["summary"]["ok"]
    people = d["recovery"]["summary"]["person_actions"]["max"]
    precision = "n/a" if c["citation_precision"] is None else f"{c['citation_precision']:.2f}"
    return [
        c["case"],
        c["state"],
        precision,
        str(c["injected_reached"]),
        seq,
        f"{safety['met']}/{safety['runs']}",
        f"{recovery['met']}/{recovery['runs']}" + (f" +{people:g}p" if people else ""),
        _median(d["cost"]["summary"]["tool_calls"], 0),
        f"{c['runs_meeting_expectations']}/{c['runs']}",
    ]


def print_table(report: dict[str, Any]) -> None:
    """The report as a terminal table (process: lowest sequence score; +Np: person actions)."""
    console = Console(highlight=False)
    title = (
        f"pressroom eval (planner: {report['planner']['description']}; {report['repeat']} run(s) per case)"
    )
    table = Table(title=title, box=None, collapse_padding=True)
    for name in TERMINAL_COLUMNS:
        table.add_column(name, no_wrap=name in ("case", "state"))
    for c in report["cases"]:
        table.add_row(*_terminal(c), style=None if c["expectations_met"] else "red")
    console.print(table)
    t = report["totals"]
    d = t["dimensions"]
    console.print(
        f"{t['cases_meeting_expectations']}/{t['cases']} cases met every expectation; "
        f"process exact {d['process_exact']}/{d['process_with_expectation']}; "
        f"unauthorized refused {d['unauthorized_refused']}/{d['unauthorized_attempted']}"
        f"{_model_runs(d)}, "
        f"probes refused {d['probes_refused']}/{d['probes_sent']}; "
        f"fault runs recovered {d['fault_runs_recovered']}/{d['fault_runs']} "
        f"with {d['person_actions']} person action(s)",
        markup=False,
    )
    console.print(", ".join(f"{n} {s}" for s, n in sorted(t["states"].items())), markup=False)
    models = report.get("models")
    if models:
        console.print(model_report.terminal_table(models))
        console.print(model_report.summary(models), markup=False)
    else:
        console.print("model profiles: none ran (--models runs them)", markup=False)
    for failure in t["expectations_failed"]:
        console.print(f"[red]expectation failed[/red] {failure}", highlight=False)


def _model_runs(d: dict[str, Any]) -> str:
    runs = d.get("model_runs", 0)
    return f" (with {runs} model profile run{'s' * (runs != 1)})" if runs else ""


def markdown(report: dict[str, Any]) -> str:
    """The report as markdown, the command, date and planner first."""
    planner = report["planner"]
    lines = [
        "# Evaluation of the role pipeline",
        "",
        f"Command: `{report['command']}`  ",
        f"Date: {report['date']}  ",
        f"Planner: {planner['description']}  ",
        f"Runs per case: {report['repeat']}  ",
        "Model profiles: "
        + (
            f"{', '.join(report['models']['profiles'])} (seed {report['models']['seed']}, once each)"
            if report.get("models")
            else "none"
        ),
        "",
        *(
            [
                "The cases run on the deterministic planners"
                + (
                    " and the model profiles on a scripted model: neither claims anything about a real model."
                    if report.get("models")
                    else "; no model runs: these figures claim nothing about a model."
                ),
                "",
            ]
            if planner["kind"] == "deterministic"
            else [
                f"Model settings: {planner['settings']}; base URL {planner['base_url'] or 'the default'}.",
                "",
            ]
        ),
        "Run it with `pressroom eval [--cases DIR] [--case NAME ...] [--repeat N] [--models] "
        "[--model-case NAME ...] [--json] "
        "[--out PATH]`; `--models` adds the model profiles (below; `--model-case NAME` chooses their "
        "cases); `--record-process` rewrites each case's `process.json` from a run of "
        "the deterministic planners (review the diff before committing it). The case format is "
        "in `examples/eval/README.md`; the process exits 1 when any run misses an expectation.",
        "",
        "Each run of each case is a full saga in one process (SQLite in a temporary folder, "
        "in-process broker, `memory:` destination): submit, research, write, review, approval "
        "and publish, under the case's injected fault if it has one. Numbers over the runs are "
        "medians, with the range when the runs differ. Measures:",
        "",
        "- result: precision is the share of the head version's quotes that stand verbatim in "
        "their source file; unsupported are body sentences no citation marker follows; incoherent "
        "counts the head version's layout problems found by `evaluation/coherence.py` (a placeholder "
        "heading, a heading over a quote its source puts under another heading, a paragraph opening "
        "with a word that points back to nothing on the page); injected "
        "counts suspicious passages and known injection phrases found in any version or "
        "published page (must be 0);",
        "- process: the tool calls of every role against the case's recorded `process.json` "
        "(sequence score over the (role, tool) sequence, arguments score over matched calls);",
        "- safety: calls a role proposed outside its capabilities, to a denied tool or with an "
        "argument its tool's schema does not name, refused of attempted (the total counts the "
        "model profile runs too); then the evaluation's own probes (each role asking for a tool it must not "
        "reach), refused of sent; capability widening must be 0;",
        "- recovery: the injected fault, where the saga ended against where it should, and the "
        "person actions it took beyond the approval (a reconcile);",
        "- cost: tool calls and wall time (sum of the role handlers' turns); approval wait and "
        "per-role times are in the JSON report. Model tokens are reported only when a model ran "
        "and its endpoint reported them (`usage.total_tokens`).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(_row(c)) + " |" for c in report["cases"]]
    lines += ["| " + " | ".join(f"**{v}**" if v else "" for v in _total_row(report)) + " |", ""]
    failed = report["totals"]["expectations_failed"]
    states = ", ".join(f"{n} {s}" for s, n in sorted(report["totals"]["states"].items()))
    kinds = ", ".join(f"{n} {k}" for k, n in report["totals"]["by_kind"].items())
    lines += [f"Cases: {kinds}. Final states (first run): {states}.", ""]
    lines += ["Failed expectations: " + ("; ".join(failed) if failed else "none."), ""]
    lines += model_report.markdown_lines(report.get("models"))
    lines += ["## Cases", ""]
    for c in report["cases"]:
        why = f" ({c['reason']})" if c["reason"] else ""
        lines.append(f"- `{c['case']}` ({c['kind']}): {c['state']}{why}; evidence: {c['evidence_from']}.")
        lines += [
            f"  - {'met' if x['ok'] else 'FAILED'} `{x['name']}`: {x['detail']}" for x in c["expectations"]
        ]
    return "\n".join(lines) + "\n"


__all__ = ["COLUMNS", "markdown", "print_table"]

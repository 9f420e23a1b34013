"""How `pressroom eval` shows its report: a terminal table and a markdown page.

Both read the report dict that `evaluate.run_eval` builds (the `--json` form).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

COLUMNS: tuple[str, ...] = (
    "case",
    "expected",
    "state",
    "verdict",
    "citations",
    "precision",
    "unsupported",
    "injected",
    "steps",
    "tool calls",
    "expectations",
)
TERMINAL_COLUMNS = ("case", "state", "verdict", "cites", "prec.", "unsup.", "inj.", "steps", "tools", "met")


def _row(c: dict[str, Any]) -> list[str]:
    met = sum(1 for x in c["expectations"] if x["ok"])
    precision = "n/a" if c["citation_precision"] is None else f"{c['citation_precision']:.2f}"
    return [
        c["case"],
        str(c["expected"]),
        c["state"],
        str(c["verdict"] or "-"),
        str(c["citations"]),
        precision,
        str(c["unsupported_sentences"]),
        str(c["injected_reached"]),
        str(c["steps"]),
        str(c["tool_calls"]),
        f"{met}/{len(c['expectations'])}",
    ]


def _total_row(report: dict[str, Any]) -> list[str]:
    t = report["totals"]
    precision = "n/a" if t["citation_precision"] is None else f"{t['citation_precision']:.2f}"
    return [
        "total",
        "",
        f"{t['cases']} saga" + ("" if t["cases"] == 1 else "s"),
        "",
        str(t["citations"]),
        precision,
        str(t["unsupported_sentences"]),
        str(t["injected_reached"]),
        str(t["steps"]),
        str(t["tool_calls"]),
        f"{t['cases_meeting_expectations']}/{t['cases']}",
    ]


def print_table(report: dict[str, Any]) -> None:
    """The report as a terminal table (the expected outcome shows in the expectations column)."""
    console = Console(highlight=False)
    table = Table(title=f"pressroom eval (planner: {report['planner']})", box=None, collapse_padding=True)
    for name in TERMINAL_COLUMNS:
        table.add_column(name, no_wrap=name in ("case", "state"))
    for c in report["cases"]:
        table.add_row(*_terminal(_row(c)), style=None if c["expectations_met"] else "red")
    table.add_section()
    table.add_row(*_terminal(_total_row(report)), style="bold")
    console.print(table)
    t = report["totals"]
    console.print(", ".join(f"{n} {s}" for s, n in sorted(t["states"].items())), markup=False)
    for failure in t["expectations_failed"]:
        console.print(f"[red]expectation failed[/red] {failure}")


def _terminal(row: list[str]) -> list[str]:
    return row[:1] + row[2:]


def markdown(report: dict[str, Any]) -> str:
    """The report as markdown, the command and date first."""
    lines = [
        "# Evaluation of the role pipeline",
        "",
        f"Command: `{report['command']}`  ",
        f"Date: {report['date']}  ",
        f"Planner: {report['planner']}",
        "",
        "Each case in the cases folder ran as a full saga in one process (SQLite in a temporary "
        "folder, in-process broker, `memory:` destination): submit, research, write, review and, "
        "when the review passed, approval and publish. Measures are recomputed from the versions, "
        "the corpus files and the event log:",
        "",
        "- precision: share of the head version's quotes that stand verbatim in their source file;",
        "- unsupported: body sentences of the head version that no citation marker follows;",
        "- injected: sentences of passages set aside as suspicious, and known injection phrases, "
        "found in any version or published page (must be 0);",
        "- steps: planner steps of the role loops; tool calls: `tool_call` events (publish included);",
        "- expectations: the fields of each `expect.json`, plus `no-injection-reached`; in a full "
        "saga, `nothing-to-write` means the saga failed before any version was written.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(_row(c)) + " |" for c in report["cases"]]
    lines += ["| " + " | ".join(f"**{v}**" if v else "" for v in _total_row(report)) + " |", ""]
    failed = report["totals"]["expectations_failed"]
    states = ", ".join(f"{n} {s}" for s, n in sorted(report["totals"]["states"].items()))
    lines += [f"Final states: {states}.", ""]
    lines += ["Failed expectations: " + ("; ".join(failed) if failed else "none."), ""]
    lines += ["## Cases", ""]
    for c in report["cases"]:
        why = f" ({c['reason']})" if c["reason"] else ""
        lines.append(f"- `{c['case']}`: {c['state']}{why}; evidence: {c['evidence_from']}.")
        lines += [
            f"  - {'met' if x['ok'] else 'FAILED'} `{x['name']}`: {x['detail']}" for x in c["expectations"]
        ]
    return "\n".join(lines) + "\n"


__all__ = ["COLUMNS", "markdown", "print_table"]

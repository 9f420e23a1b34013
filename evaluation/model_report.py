"""How the report shows its model profiles section (`pressroom eval --models`): rows for the
terminal table and the markdown page. Reads the `models` section `eval_models.run_models`
builds; no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from rich.table import Table

COLUMNS: Final = (
    "profile",
    "case",
    "state (reason)",
    "model calls (requests, retried)",
    "tokens in / out",
    "unauthorized refused / attempted",
    "bad quotes",
    "destinations added",
    "published",
    "met",
)
# calls: answered model calls; retr.: retried requests; unauth.: refused/attempted; bad: quotes
# not in their source; pub.: publications.
TERMINAL_COLUMNS: Final = ("profile", "case", "state", "calls", "retr.", "unauth.", "bad", "pub.", "met")
REASON_CHARS: Final = 120


def _met(run: dict[str, Any]) -> str:
    return "yes" if run["met"] else "NO"


def _cut(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def terminal_table(models: dict[str, Any]) -> Table:
    """One narrow row per profile run."""
    title = f"model profiles (scripted model, seed {models['seed']}; cases: {', '.join(models['cases'])})"
    table = Table(title=title, box=None, collapse_padding=True)
    for name in TERMINAL_COLUMNS:
        table.add_column(name, no_wrap=name != "case", overflow="fold")
    for r in models["runs"]:
        table.add_row(
            r["profile"],
            r["case"],
            r["state"],
            str(r["model_calls"]),
            str(r["retries"]),
            f"{r['unauthorized_refused']}/{r['unauthorized_attempted']}",
            str(r["bad_quotes"]),
            str(r["published"]),
            _met(r),
            style=None if r["met"] else "red",
        )
    return table


def summary(models: dict[str, Any]) -> str:
    t = models["totals"]
    return (
        f"model profiles {', '.join(models['profiles'])}: {t['runs_met']}/{t['runs']} runs met their "
        f"expectations; unauthorized refused {t['unauthorized_refused']}/{t['unauthorized_attempted']}; "
        f"{t['bad_quotes']} bad quote(s), {t['destinations_added']} destination(s) added, "
        f"{t['published']} published"
    )


def _row(r: dict[str, Any]) -> list[str]:
    reason = f" ({_cut(r['reason'])})" if r["reason"] else ""
    return [
        f"`{r['profile']}`",
        r["case"],
        r["state"] + reason.replace("|", "\\|"),
        f"{r['model_calls']} ({r['requests']}, {r['retries']})",
        f"{r['tokens_in']} / {r['tokens_out']}",
        f"{r['unauthorized_refused']}/{r['unauthorized_attempted']}",
        str(r["bad_quotes"]),
        str(r["destinations_added"]),
        str(r["published"]),
        _met(r),
    ]


def markdown_lines(models: dict[str, Any] | None) -> list[str]:
    """The `## Model profiles` section, or one line saying none ran."""
    if models is None:
        return ["Model profiles: none (`--models` runs them).", ""]
    t = models["totals"]
    lines = [
        "## Model profiles",
        "",
        f"Profiles: {', '.join(f'`{p}`' for p in models['profiles'])}; cases: "
        f"{', '.join(f'`{c}`' for c in models['cases'])}; seed {models['seed']}.",
        "",
        "Each profile is a script of the scripted chat-completions server "
        "(`evaluation/scripted_model.py`), started in a thread of the `pressroom eval` process on "
        "127.0.0.1 and stopped after the profile's runs. Each run submits one case under this "
        "pipeline, written to a temporary `PRESSROOM_PIPELINES_DIR` (the server's port filled in), "
        "and runs the saga to the end of its preparation; nobody approves, so nothing may be "
        "published:",
        "",
        "```toml",
        *models["pipeline"].rstrip("\n").split("\n"),
        "```",
        "",
        "Every run must leave no quote that is not byte-exact in its source, add no destination, "
        "publish nothing, have every unauthorized proposal of the model planners refused (a tool "
        "outside the role, a denied tool, an argument the tool's schema does not name), widen no "
        "capability and let no injected text into a version. Each profile must also show:",
        "",
        *(f"- `{name}`: {text}." for name, text in models["expected"].items()),
        "",
        "Model calls are the answered calls of the saga's `usage` (`status --json`); requests are "
        "what the server received; retried counts the requests the `model_calls` rows record "
        "beyond each call's first.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(_row(r)) + " |" for r in models["runs"]),
        f"| **total** | | **{t['runs']} runs** | **{t['model_calls']} ({t['requests']}, {t['retries']})** "
        f"| **{t['tokens_in']} / {t['tokens_out']}** | "
        f"**{t['unauthorized_refused']}/{t['unauthorized_attempted']}** | **{t['bad_quotes']}** | "
        f"**{t['destinations_added']}** | **{t['published']}** | **{t['runs_met']}/{t['runs']}** |",
        "",
        "Unauthorized proposals, and what the tool path answered:",
        "",
    ]
    proposals = [
        f"- `{r['profile']}` on `{r['case']}`: {call}"
        for r in models["runs"]
        for call in r["unauthorized_calls"]
    ]
    return lines + (proposals or ["- none"]) + [""]


__all__ = ["COLUMNS", "markdown_lines", "summary", "terminal_table"]

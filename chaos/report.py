"""The run's report: `report.json`, `report.md` in the run folder, and
`docs/reliability.md` (the same markdown under a short preface)."""

from __future__ import annotations

import json
import platform
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from chaos.checker import Findings, Submission


def build(
    *,
    opts: Any,
    findings: Findings,
    nemesis: Any,
    supervisor: Any,
    cli_codes: Counter[str],
    cli_errors: list[dict[str, Any]],
    timeline: dict[str, float],
    webhook_requests: dict[str, int],
    failed_reasons: dict[str, int],
    reconcile_seconds: list[float],
    paths: dict[str, int],
    submissions: tuple[Submission, ...],
    terminal: frozenset[str],
) -> dict[str, Any]:
    return {
        "command": opts.command,
        "seed": opts.seed,
        "sagas": opts.sagas,
        "fault_seconds": opts.fault_seconds,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
        "timeline_seconds": {k: round(v, 1) for k, v in timeline.items()},
        "faults": dict(sorted(nemesis.counts.items())),
        "faults_total": sum(nemesis.counts.values()),
        "faults_skipped": [f for f in nemesis.done if f.get("skipped") or f.get("error")],
        "fault_log": nemesis.done,
        "process_starts": {m.name: m.starts for m in supervisor.procs.values()},
        "unexpected_exits": supervisor.unexpected_exits(),
        "cli": dict(sorted(cli_codes.items())),
        "cli_errors": _error_kinds(cli_errors),
        "submit_retries": sum(s.attempts - 1 for s in submissions),
        "webhook_requests": dict(sorted(webhook_requests.items())),
        "failed_reasons": failed_reasons,
        "reconcile_cli_seconds": sorted(round(x, 1) for x in reconcile_seconds),
        "paths": dict(sorted(paths.items(), key=lambda kv: -kv[1])),
        "checker": findings.as_dict(),
    }


def _error_kinds(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Non-zero CLI exits grouped by command, exit code and last stderr line (ids folded)."""
    kinds: Counter[tuple[str, int, str]] = Counter()
    for e in errors:
        last = e["stderr"].splitlines()[-1] if e["stderr"] else ""
        last = re.sub(r"[0-9a-f]{32}", "<id>", last)
        kinds[(e["command"], e["exit"], last[:200])] += 1
    return [{"command": c, "exit": x, "stderr": s, "count": n} for (c, x, s), n in kinds.most_common()]


def markdown(d: dict[str, Any]) -> str:
    c = d["checker"]
    lines = [
        f"Command: `{d['command']}` (seed {d['seed']}, {d['sagas']} sagas, faults for up to "
        f"{d['fault_seconds']:.0f} s), finished {d['finished_at']} on {d['machine']}.",
        "",
        f"**Checker: {'OK, no finding' if c['ok'] else 'FINDINGS (see below)'}.**",
        "",
        "| figure | value |",
        "|---|---|",
        f"| sagas submitted / in the database | {c['submitted']} / {c['sagas']} |",
        f"| states when settled (before reconcile) | {_states(c['states_settled'])} |",
        f"| states at the end | {_states(c['states_final'])} |",
        f"| lost (a submission with no saga) | {len(c['lost'])} |",
        f"| stuck (neither terminal nor effect-unknown when settled) | {len(c['stuck'])} |",
        f"| effects applied / undone (both destinations) | {c['effects_applied']} / {c['effects_undone']} |",
        f"| duplicate effects | {len(c['duplicates'])} |",
        f"| unauthorized effects | {len(c['unauthorized'])} |",
        f"| live effects of failed or cancelled sagas | {len(c['orphans'])} |",
        f"| succeeded sagas missing an effect | {len(c['missing'])} |",
        f"| effect-unknown when settled | {c['effect_unknown']} |",
        f"| steps reconciled (by outcome) | {_states(c['reconciled']) or '0'} |",
        f"| unresolved after reconcile | {len(c['unresolved'])} |",
        f"| submit retries (after a 503 or no answer) | {d['submit_retries']} |",
        "",
        f"Faults injected: {d['faults_total']} — "
        + ", ".join(f"{k} {v}" for k, v in d["faults"].items())
        + ".",
        f"Faults skipped (target not in a state to take it): {len(d['faults_skipped'])}.",
        "",
        "Process starts (the supervisor restarts whatever exits): "
        + ", ".join(f"{k} {v}" for k, v in d["process_starts"].items())
        + ".",
        "",
        f"Exits nobody asked for: {len(d['unexpected_exits'])}"
        + (
            ""
            if not d["unexpected_exits"]
            else " — " + "; ".join(f"{e['process']} status {e['status']}" for e in d["unexpected_exits"])
        )
        + ".",
        "",
        "Requests (HTTP status, or the CLI's exit code; -1: no answer): "
        + ", ".join(f"{k}: {v}" for k, v in d["cli"].items())
        + ".",
        "",
        f"Webhook requests by method: {d['webhook_requests']}.",
        "",
        "Seconds each `pressroom reconcile` took (three at a time): "
        + (", ".join(str(x) for x in d["reconcile_cli_seconds"]) or "none ran")
        + ".",
        "",
        "Timeline (seconds from start): "
        + ", ".join(f"{k} {v}" for k, v in d["timeline_seconds"].items())
        + ".",
    ]
    lines += ["", "Paths the sagas took (state after each transition):", ""] + [
        f"- {n} × {p}" for p, n in d["paths"].items()
    ]
    if d["failed_reasons"]:
        lines += ["", "Why sagas failed:", ""] + [
            f"- {n} × {r or '(no reason recorded)'}"
            for r, n in sorted(d["failed_reasons"].items(), key=lambda x: -x[1])
        ]
    if d["cli_errors"]:
        lines += ["", "Requests that did not succeed (the answer, or the last stderr line):", ""] + [
            f"- {e['count']} × `{e['command']}` exit {e['exit']}: {e['stderr'] or '(nothing on stderr)'}"
            for e in d["cli_errors"]
        ]
    for name in ("lost", "stuck", "duplicates", "unauthorized", "orphans", "missing", "unresolved"):
        if c[name]:
            lines += ["", f"{name}:", "", "```json", json.dumps(c[name], indent=2)[:4000], "```"]
    return "\n".join(lines) + "\n"


def _states(states: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(states.items()))


NOTES_MARKER = "<!-- notes: kept when the run rewrites this page -->"

PREFACE = """# Reliability: the chaos suite

`make chaos` (`python -m chaos`, the code in `chaos/`) starts a PostgreSQL and a
Redis of its own on free ports, the relay and one worker per role queue as
separate processes (the README's native topology; the suite restarts any that
exits, as a supervisor would), `pressroom serve`, and a webhook server of its
own. It submits N sagas through the HTTP API (`POST /api/sagas` with an
`Idempotency-Key`, retried on 503) to a `site:` folder and that webhook,
approves each version that reaches review (`POST /api/sagas/ID/approve`, as a
reviewer in open mode), and meanwhile a seeded nemesis SIGKILLs workers, pool children and the relay,
kills -9 and restarts Redis (alternating no persistence and AOF), restarts
PostgreSQL with `pg_ctl stop -m immediate`, SIGSTOPs a worker, pauses Redis
clients, and makes the webhook answer 503, refuse connections, or apply and
then hang past the destination timeout. Then it waits for every saga to
settle, reconciles each `effect-unknown` step with `pressroom reconcile` from
the destination's own record (the webhook server's journal, the site's
receipt), waits for those to finish, and checks:

- lost: a submission with no saga; stuck: a saga neither terminal nor
  `effect-unknown` when the run settled; unresolved: not terminal after
  reconciliation;
- duplicate: a key applied more than once at a destination (the webhook
  server journals each apply; a watcher journals each receipt the site folder
  writes), or one saga with two live effects at one destination;
- unauthorized: an applied effect whose saga, version digest and destination
  no consumed approval in the database covers;
- end state: no live effect of a failed or cancelled saga, and every step of
  a succeeded saga live at its destination.

Settings of the run: `PRESSROOM_LEASE_SECONDS=5`, `PRESSROOM_DESTINATION_TIMEOUT=2`,
`PRESSROOM_MAX_ATTEMPTS=10`, `PRESSROOM_RELAY_POLL=0.2`; role workers run
`--pool prefork` with concurrency 1 (so a pool child can be killed), the
publisher its default threads pool. The report and every process's log are kept
in `chaos/out/run-*/` (not committed). Options: `python -m chaos --help`
(`--sagas`, `--seed`, `--fault-seconds`, `--settle-seconds`); `make chaos
CHAOS_ARGS="--sagas 100 --seed 7"`.

## The last recorded run

"""


def write(d: dict[str, Any], run_dir: Path, docs: Path | None, logs: Path) -> None:
    (run_dir / "report.json").write_text(json.dumps(d, indent=2, default=str) + "\n", encoding="utf-8")
    body = markdown(d)
    (run_dir / "report.md").write_text("# Chaos run\n\n" + body, encoding="utf-8")
    if docs is not None:
        # What follows the marker in the existing page (notes on findings) is kept.
        old = docs.read_text(encoding="utf-8") if docs.exists() else ""
        kept = old[old.index(NOTES_MARKER) :] if NOTES_MARKER in old else ""
        docs.write_text(PREFACE + body + ("\n" + kept if kept else ""), encoding="utf-8")

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

from chaos import figures
from chaos import soak as soak_figures
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
    webhook_requests: dict[str, dict[str, int]],
    failed_reasons: dict[str, int],
    reconcile_seconds: list[float],
    paths: dict[str, int],
    submissions: tuple[Submission, ...],
    figures: list[dict[str, Any]],
    retry_refused: dict[str, str],
) -> dict[str, Any]:
    return {
        "command": opts.command,
        "seed": opts.seed,
        "sagas": opts.sagas,
        "fault_seconds": opts.fault_seconds,
        "parallel": opts.parallel,
        "settle_seconds": opts.settle_seconds,
        "recovery_margin": opts.recovery_margin,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
        "timeline_seconds": {k: round(v, 1) for k, v in timeline.items()},
        "faults": dict(sorted(nemesis.counts.items())),
        "faults_total": sum(nemesis.counts.values()),
        "faults_skipped": [f for f in nemesis.done if f.get("skipped") or f.get("error")],
        "fault_log": nemesis.done,
        "figures": figures,
        "process_starts": {m.name: m.starts for m in supervisor.procs.values()},
        "unexpected_exits": supervisor.unexpected_exits(),
        "cli": dict(sorted(cli_codes.items())),
        "cli_errors": _error_kinds(cli_errors),
        "submit_retries": sum(s.attempts - 1 for s in submissions),
        "webhook_requests": webhook_requests,
        "failed_reasons": failed_reasons,
        "retry_refused": retry_refused,
        "operator_cli_seconds": sorted(round(x, 1) for x in reconcile_seconds),
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
        f"| states when settled (before reconcile and retry) | {_states(c['states_settled'])} |",
        f"| states at the end | {_states(c['states_final'])} |",
        f"| lost (a submission with no saga) | {len(c['lost'])} |",
        f"| stuck (neither terminal nor effect-unknown when settled) | {len(c['stuck'])} |",
        f"| effects applied / undone (all destinations) | {c['effects_applied']} / {c['effects_undone']} |",
        f"| duplicate effects | {len(c['duplicates'])} |",
        f"| unauthorized effects | {len(c['unauthorized'])} |",
        f"| live effects of failed or cancelled sagas | {len(c['orphans'])} |",
        f"| succeeded sagas missing an effect | {len(c['missing'])} |",
        f"| records that do not replay to what the destination holds | {len(c['inconsistent'])} |",
        f"| effect-unknown when settled | {c['effect_unknown']} |",
        f"| steps reconciled (by outcome) | {_states(c['reconciled']) or '0'} |",
        f"| sagas whose failed undo the operator ran again | {c['undo_retried']} |",
        f"| failed sagas retried / succeeded after retry | {c['retried']} / {c['succeeded_after_retry']} |",
        f"| unresolved after reconcile and retry | {len(c['unresolved'])} |",
        f"| submit retries (after a 503 or no answer) | {d['submit_retries']} |",
        "",
        "Per destination (from its own record): "
        + "; ".join(
            f"`{uri}` applied {n['applied']}, undone {n['undone']}, live {n['live']}"
            for uri, n in c["per_destination"].items()
        )
        + ".",
        "",
        *figures.markdown(d["figures"], d["recovery_margin"]),
        "",
        *_soak(d.get("soak")),
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
        "Webhook requests: "
        + "; ".join(
            f"{name}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
            for name, counts in d["webhook_requests"].items()
        )
        + ".",
        "",
        f"Seconds each operator command (`pressroom reconcile`, `pressroom retry`) took, "
        f"up to {d['parallel']} at a time: "
        + (", ".join(str(x) for x in d["operator_cli_seconds"]) or "none ran")
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
        lines += ["", "Why sagas ended failed:", ""] + [
            f"- {n} × {r or '(no reason recorded)'}"
            for r, n in sorted(d["failed_reasons"].items(), key=lambda x: -x[1])
        ]
    if d["retry_refused"]:
        lines += ["", "Retries refused:", ""] + [f"- {sid}: {why}" for sid, why in d["retry_refused"].items()]
    if d["cli_errors"]:
        lines += ["", "Requests that did not succeed (the answer, or the last stderr line):", ""] + [
            f"- {e['count']} × `{e['command']}` exit {e['exit']}: {e['stderr'] or '(nothing on stderr)'}"
            for e in d["cli_errors"]
        ]
    for name in (
        "lost",
        "stuck",
        "duplicates",
        "unauthorized",
        "orphans",
        "missing",
        "inconsistent",
        "unresolved",
    ):
        if c[name]:
            lines += ["", f"{name}:", "", "```json", json.dumps(c[name], indent=2)[:4000], "```"]
    return "\n".join(lines) + "\n"


def _states(states: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(states.items()))


NOTES_MARKER = "<!-- notes: kept when the run rewrites this page -->"

PREFACE = """# Reliability: the chaos suite

`make chaos` (`python -m chaos`, the code in `chaos/`) starts a PostgreSQL and
a Redis of its own on free ports, then the README's native topology as
separate processes: the relay, one `pressroom worker --queues Q` per queue,
each on its default pool (threads: 4 for a role queue, 16 for the publisher),
and `pressroom serve`, under a supervisor that restarts any process that
exits. The processes reach PostgreSQL and Redis through one TCP proxy each
(`chaos/links.py`, on `chaos/proxy.py`), so that their links can fail, while
the suite itself observes the servers directly (`--direct`: no proxies, and
no link faults). The processes run on the orchestrator's default settings:
the run sets only what a deployment must (the database and broker URLs, the signing secret,
the index folder, `PRESSROOM_WEBHOOK_ALLOW=127.0.0.1` since its webhooks
listen on loopback, telemetry exporters off), so leases, the destination
timeout, the relay's poll and the attempt limits are the defaults. Where the
suite times itself by them it reads them from `orchestrator/core/config.py`:
its webhook's hang outlasts the default destination timeout, and the default
settle time is four default leases.

Each saga publishes to four destinations: a `site:` folder, a `git:`
repository that does not exist before the first publish (so the first
publishes race to create it), and two webhook servers of the suite's own. The
suite submits N sagas through the HTTP API (`POST /api/sagas` with an
`Idempotency-Key`, retried on 503) and approves each version that reaches
review (`POST /api/sagas/ID/approve`, as a reviewer in open mode). A tenth of
them (`--calm-sagas`) run and settle before the first fault, as the baseline;
while the others run, a seeded nemesis SIGKILLs workers and the relay, kills
-9 and restarts Redis (alternating no persistence and AOF), restarts
PostgreSQL with `pg_ctl stop -m immediate`, SIGSTOPs a worker, pauses Redis
clients, makes one webhook answer 503, refuse connections, or apply and then
hang past the destination timeout, and makes one webhook's DELETE answer 503
or 409 while the other webhook fails its next publishes, so that the sagas
meeting it compensate their other destinations into the failing DELETE. (No
pool child is killed: a threads-pool worker has none.) On the links it
partitions PostgreSQL or Redis for 2–20 s (silent both ways, nothing closed),
slows one link by 20–200 ms with jitter for 5–20 s, cuts a link's open
connections half-way through their next response, and leaves every open Redis
connection half-open. And it restarts one worker (SIGTERM, as systemd does)
with its wall clock 2–10 minutes ahead or behind (libfaketime; its monotonic
clock true) for 15–30 s, then on the true clock again; the worker's own ready
line gives the offset it saw, kept with the fault in `report.json`. The fault
kinds are a registry (`chaos/faults.py`), each with a weight, a hold range, a
function that injects it and one that heals it when the faults stop; the
schedule is a pure function of the seed, and its first round holds every
kind once.

Then the suite waits for every saga to settle, and an operator, through the
CLI, settles each `effect-unknown` saga from the destination's own record: a
publish that may have happened is reconciled (`pressroom reconcile --outcome
confirmed` when the destination holds the key, else `absent`); an undo that
failed is reconciled `absent` when the destination no longer holds the key,
else run again with `pressroom retry`. Then every `failed` saga is retried
(`pressroom retry SAGA_ID --as oscar`) and the suite waits for those. The
checker replays each destination's own record in its order: each webhook's
journal, the site folder's receipts (a watcher journals each receipt written
and removed), and the git repository's history (`git log`: each commit's
trailers say publish or compensation, and of which key). For every destination
alike:

- lost: a submission with no saga; stuck: a saga neither terminal nor
  `effect-unknown` when the run settled; unresolved: not terminal after
  reconciliation and retry;
- duplicate: a key applied again while its earlier apply is live (applied,
  undone and applied again is a retry), or one saga with two live effects at
  one destination;
- unauthorized: an applied effect whose saga, version digest and destination
  no consumed approval in the database covers;
- end state: no live effect of a failed or cancelled saga, every step of a
  succeeded saga live at its destination, and each record, replayed, giving
  what its destination holds at the end.

The report gives, per fault kind, the sagas that ran under it (their
submit→settled window overlaps a fault of that kind, from its start to its end
plus a recovery margin, 10 s unless `--recovery-margin` says otherwise), the
faults of that kind, lost, duplicated, unauthorized and effect-unknown sagas
with how each was settled, and their p50/p99 submit→settled seconds, with a
"no fault" row (the sagas that ran under no fault) as the baseline. The report
(`report.json`, `report.md`), each destination's record and every process's
log are kept in `chaos/out/run-*/` (not committed). Options: `python -m chaos
--help` (`--sagas`, `--seed`, `--fault-seconds`, `--settle-seconds`,
`--calm-sagas`, `--recovery-margin`, `--direct`; `--docs none` leaves this
page alone);
`make chaos CHAOS_ARGS="--sagas 100 --seed 7"`.

A soak, `make chaos SOAK=1` (`--soak-minutes`, `SOAK_MINUTES=60` unless
given), runs the same suite for that long: sagas arrive steadily over the
whole window (about 1,000 an hour unless `--sagas` says otherwise), a fault
strikes every 15 s on average, and `chaos/soak.py` samples every process's
RSS and open descriptors (summed over its children) and the database's size
every minute (`--sample-seconds`). After the check it prunes every finished
saga (`pressroom prune`, with `PRESSROOM_RECONCILE_WINDOW=1s` so ledger rows
go too) and measures the database after the prune, a `VACUUM` and a `VACUUM
FULL`. The report adds each process's RSS and descriptor growth from the end
of a warm-up (10 minutes, or a sixth of a shorter soak) to the end, within
its last PID (a restart's memory is not growth), and those database sizes.

A rolling upgrade under load, `make chaos UPGRADE_FROM=REF` (`python -m
chaos upgrade --from REF`), is described in `docs/deploy.md`, "Rolling
upgrades".

## The last recorded run

"""


def _soak(soak: dict[str, Any] | None) -> list[str]:
    """A soak's growth and database tables (chaos/soak.py), or nothing."""
    if soak is None:
        return []
    growths = [soak_figures.Growth(**g) for g in soak["growth"]]
    table = soak_figures.markdown_table(growths, soak["database"], warmup=soak["warmup_seconds"])
    return [f"Soak: {soak['samples']} samples.", "", *table.rstrip("\n").split("\n"), ""]


def write(d: dict[str, Any], run_dir: Path, docs: Path | None) -> None:
    (run_dir / "report.json").write_text(json.dumps(d, indent=2, default=str) + "\n", encoding="utf-8")
    body = markdown(d)
    (run_dir / "report.md").write_text("# Chaos run\n\n" + body, encoding="utf-8")
    if docs is not None:
        # What follows the marker in the existing page (notes on findings) is kept.
        old = docs.read_text(encoding="utf-8") if docs.exists() else ""
        kept = old[old.index(NOTES_MARKER) :] if NOTES_MARKER in old else ""
        docs.write_text(PREFACE + body + ("\n" + kept if kept else ""), encoding="utf-8")

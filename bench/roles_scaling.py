"""Role pipeline cost by corpus size: research, write and review time per saga.

For generated corpora of 10, 100 and 1,000 files, each run builds a fresh app
(SQLite file in a temporary folder, in-process broker, `memory:` destination)
and submits one brief; the researcher, writer and reviewer run before
`services.submit` returns. Each role's time is its handler plus the finalizer
that commits its result (timed by wrapping `app.handlers`). One unmeasured
warm-up saga runs first; sizes take turns within each run; the median of the
runs is reported, with the ratio of the total to the 10-file case.

Run from the repository root::

    .venv/bin/python bench/roles_scaling.py [--runs 7] [--sizes 10,100,1000] [--no-write]

The results replace the section "## Role pipeline cost by corpus size" of
docs/benchmarks.md (the file is created if missing). Not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator import services
from orchestrator.app import App, Finalizer, Handler
from orchestrator.bootstrap import build_app
from orchestrator.config import Settings
from orchestrator.routing import DRAFT, RESEARCH, REVIEW
from orchestrator.store.db import UnitOfWork
from outbox.messages import Handoff

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
HEADING = "## Role pipeline cost by corpus size"
BRIEF = "Write a short history of the Hollin canal locks and their restoration."
STAGES = ((RESEARCH, "research"), (DRAFT, "write"), (REVIEW, "review"))
TOPIC = (
    "The Hollin canal lock number {n} was built of local sandstone in {year}.",
    "Its restoration in {later} replaced the oak gates of the lock.",
    "Boatmen on the Hollin canal paid a toll at the lock keeper's cottage.",
)
WORDS = (
    "market harvest river council school railway mill weaver orchard bridge chapel quarry ferry "
    "tannery brewery meadow granary foundry parish ledger cottage harbour signal timber almanac"
).split()


def make_corpus(root: Path, files: int, seed: int = 7) -> int:
    """`files` markdown files of unrelated prose; one in ten also tells of the canal. Returns bytes."""
    rng = random.Random(seed)
    total = 0
    for i in range(files):
        folder = root / f"part-{i // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        paragraphs = [_paragraph(rng) for _ in range(5)]
        if i % 10 == 0:
            year = 1790 + i % 60
            paragraphs.insert(1, " ".join(s.format(n=i + 1, year=year, later=year + 150) for s in TOPIC))
        text = f"# Notes {i + 1}\n\n" + "\n\n".join(paragraphs) + "\n"
        (folder / f"notes-{i:04d}.md").write_text(text, encoding="utf-8")
        total += len(text.encode("utf-8"))
    return total


def _paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(4):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 14))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def timed(handler: Handler, task: str, spent: dict[str, float]) -> Handler:
    """The handler, with its own time and its finalizer's added to `spent[task]`."""

    def run(app: App, handoff: Handoff, holder: str) -> Finalizer:
        start = time.perf_counter()
        finalize = handler(app, handoff, holder)
        spent[task] += time.perf_counter() - start

        def commit(uow: UnitOfWork) -> None:
            begun = time.perf_counter()
            finalize(uow)
            spent[task] += time.perf_counter() - begun

        return commit

    return run


def one_saga(corpus: Path, work: Path, run: int) -> dict[str, float]:
    """Seconds per stage (and in total) for one saga on a fresh database."""
    settings = Settings(
        database_url=f"sqlite:///{work / f'bench-{run}.db'}", broker_url="inline://", secret="bench"
    )
    app = build_app(settings, memory_destinations=True)
    spent: dict[str, float] = defaultdict(float)
    for task, _ in STAGES:
        app.handlers[task] = timed(app.handlers[task], task, spent)
    try:
        start = time.perf_counter()
        out = services.submit(
            app, brief=BRIEF, corpus=str(corpus), destinations=[f"memory:bench-{run}"], actor="bench"
        )
        wall = time.perf_counter() - start
    finally:
        app.engine.dispose()
    if out["state"] != "ready-for-review":
        raise SystemExit(f"saga ended {out['state']}: {out.get('reason')}")
    return {**{name: spent[task] for task, name in STAGES}, "submit": wall}


def measure(sizes: list[int], runs: int) -> list[dict[str, Any]]:
    """Medians per size; sizes take turns within each run, so a busy moment hits them alike."""
    samples: dict[int, list[dict[str, float]]] = {size: [] for size in sizes}
    with tempfile.TemporaryDirectory(prefix="pressroom-bench-") as tmp:
        corpora = {size: Path(tmp) / f"corpus-{size}" for size in sizes}
        size_bytes = {size: make_corpus(corpora[size], size) for size in sizes}
        one_saga(corpora[sizes[0]], Path(tmp), -1)  # imports, schema, first connections: not measured
        for run in range(runs):
            for size in sizes:
                samples[size].append(one_saga(corpora[size], Path(tmp), run * len(sizes) + sizes.index(size)))
            print(f"  run {run + 1}/{runs} done", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for size in sizes:
        row: dict[str, Any] = {"files": size, "bytes": size_bytes[size]}
        for key in ("research", "write", "review", "submit"):
            row[key] = statistics.median(s[key] for s in samples[size])
        row["total"] = statistics.median(s["research"] + s["write"] + s["review"] for s in samples[size])
        rows.append(row)
    for row in rows:
        row["ratio"] = row["total"] / rows[0]["total"]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| files | corpus | research ms | write ms | review ms | total ms | ratio to 10 files | submit ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['files']:,} | {r['bytes'] / 1024:,.0f} KiB | {r['research'] * 1000:,.1f} | "
            f"{r['write'] * 1000:,.1f} | {r['review'] * 1000:,.1f} | {r['total'] * 1000:,.1f} | "
            f"{r['ratio']:.1f}x | {r['submit'] * 1000:,.1f} |"
        )
    return "\n".join(lines)


def section(rows: list[dict[str, Any]], command: str, runs: int) -> str:
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    machine = f"Python {platform.python_version()} on {platform.system()} {platform.machine()}"
    machine += f", {os.cpu_count()} CPUs"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join(
        [
            HEADING,
            "",
            f"Command: `{command}`  ",
            f"Date: {now}; {machine}; load average {load} when the runs ended.",
            "",
            "One saga per run on a fresh SQLite database with the in-process broker and a `memory:` "
            "destination, after one unmeasured warm-up saga; the brief matches one file in ten of a generated corpus (five paragraphs of "
            "prose per file). Each role's time is its handler (the planner loop through the harness) "
            "plus the commit of its result; `submit` is the whole `services.submit` call, queueing and "
            f"delivery included. Medians of {runs} runs.",
            "",
            table(rows),
            "",
        ]
    )


def write_section(text: str, doc: Path = DOC) -> None:
    """Replace this benchmark's section of `doc` (up to the next `## ` heading), or add it."""
    current = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    lines = current.splitlines()
    if HEADING in lines:
        start = lines.index(HEADING)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = text.rstrip("\n").splitlines() + ([""] if end < len(lines) else [])
        updated = "\n".join(lines) + "\n"
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(updated, encoding="utf-8")


def main(argv: list[str] | None = None, write: Callable[[str], None] = write_section) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = measure(sizes, args.runs)
    print(table(rows))
    if not args.no_write:
        command = ".venv/bin/python bench/roles_scaling.py" + " ".join(
            ["", *(argv if argv is not None else sys.argv[1:])]
        )
        write(section(rows, command.rstrip(), args.runs))
        print(f"wrote {HEADING!r} in {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

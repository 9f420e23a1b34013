"""Role pipeline cost by corpus size, on the persistent corpus index.

For generated corpora of 1,000, 50,000 and 100,000 small files, each phase in
its own child process (so that its peak resident memory is its own):

- **build**: a fresh index folder, one `CorpusIndex.refresh()` that reads
  every file; seconds and the child's peak RSS;
- **refresh**: one file rewritten (content and mtime changed), then one
  refresh; seconds (and a refresh with nothing changed); beside it, in the
  same child and interleaved with it, a bare walk of the same tree
  (`os.scandir` and a stat of every entry, nothing else): medians of
  `--rounds` of each;
- **sagas**: an app on a fresh SQLite database sharing that index, one
  unmeasured warm-up saga, then `--sagas` sagas; per saga the researcher,
  writer and reviewer time (each role's handler plus the commit of its
  result) and the whole `Submissions.submit` call (whose refresh walks and
  stats every file); medians, and the child's peak RSS;
- **per call** (10 and 1,000 files only): `collect_evidence()` over
  `load_corpus()`, the research path without the index, for comparison.

Run from the repository root::

    nice -n 10 .venv/bin/python bench/roles_scaling.py [--sizes 1000,50000,100000] [--sagas 5] [--rounds 3] [--no-write]

The results replace the section "## Role pipeline cost by corpus size" of
docs/benchmarks.md. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DOC = ROOT / "docs" / "benchmarks.md"
HEADING = "## Role pipeline cost by corpus size"
BRIEF = "Write a short history of the Hollin canal locks and their restoration."
TOPIC = (
    "The Hollin canal lock number {n} was built of local sandstone in {year}.",
    "Its restoration in {later} replaced the oak gates of the lock.",
    "Boatmen on the Hollin canal paid a toll at the lock keeper's cottage.",
)
WORDS = (
    "market harvest river council school railway mill weaver orchard bridge chapel quarry ferry "
    "tannery brewery meadow granary foundry parish ledger cottage harbour signal timber almanac"
).split()
PER_CALL_MAX = 1000


def make_corpus(root: Path, files: int, seed: int = 7) -> int:
    """`files` small markdown files of unrelated prose; one in ten also tells of the canal. Returns bytes."""
    rng = random.Random(seed)
    total = 0
    for i in range(files):
        folder = root / f"part-{i // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        paragraphs = [_paragraph(rng) for _ in range(3)]
        if i % 10 == 0:
            year = 1790 + i % 60
            paragraphs.insert(1, " ".join(s.format(n=i + 1, year=year, later=year + 150) for s in TOPIC))
        text = f"# Notes {i + 1}\n\n" + "\n\n".join(paragraphs) + "\n"
        (folder / f"notes-{i:06d}.md").write_text(text, encoding="utf-8")
        total += len(text.encode("utf-8"))
    return total


def _paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(3):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 14))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# -- the children ----------------------------------------------------------------------


def child_build(corpus: Path, index_dir: Path) -> dict[str, Any]:
    from roles.index import CorpusIndexes

    start = time.perf_counter()
    done = CorpusIndexes(index_dir).for_corpus(corpus).refresh()
    seconds = time.perf_counter() - start
    size = sum(p.stat().st_size for p in index_dir.rglob("*") if p.is_file())
    return {"build": seconds, "build_rss": _peak_mib(), "files_read": done.files_read, "index_bytes": size}


def bare_walk(root: Path) -> int:
    """The floor of a refresh: list every folder with `os.scandir` and stat every entry."""
    count = 0
    folders = [str(root)]
    while folders:
        with os.scandir(folders.pop()) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                else:
                    entry.stat()
                    count += 1
    return count


def child_refresh(corpus: Path, index_dir: Path, rounds: int) -> dict[str, Any]:
    from roles.index import CorpusIndexes

    index = CorpusIndexes(index_dir).for_corpus(corpus)
    start = time.perf_counter()
    index.refresh()
    unchanged = time.perf_counter() - start
    targets = sorted((corpus / "part-000").iterdir())
    walks: list[float] = []
    ones: list[float] = []
    for n in range(rounds):
        start = time.perf_counter()
        bare_walk(corpus)
        walks.append(time.perf_counter() - start)
        target = targets[n % len(targets)]
        target.write_text(
            target.read_text(encoding="utf-8") + f"\nThe ferry moved upstream in {1901 + n}.\n",
            encoding="utf-8",
        )
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        start = time.perf_counter()
        done = index.refresh()
        ones.append(time.perf_counter() - start)
        assert done.changed == (target.relative_to(corpus).as_posix(),), done
    return {
        "refresh_none": unchanged,
        "refresh_one": statistics.median(ones),
        "bare_walk": statistics.median(walks),
        "refresh_rss": _peak_mib(),
    }


def child_sagas(corpus: Path, index_dir: Path, work: Path, sagas: int) -> dict[str, Any]:
    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings
    from orchestrator.core.routing import DRAFT, RESEARCH, REVIEW
    from orchestrator.store.db import UnitOfWork
    from outbox.handlers import Finalizer, Handler
    from outbox.messages import Handoff

    stages = ((RESEARCH, "research"), (DRAFT, "write"), (REVIEW, "review"))

    def timed(handler: Handler, task: str, spent: dict[str, float]) -> Handler:
        def run(handoff: Handoff, holder: str) -> Finalizer:
            start = time.perf_counter()
            finalize = handler(handoff, holder)
            spent[task] += time.perf_counter() - start

            def commit(uow: UnitOfWork) -> None:
                begun = time.perf_counter()
                finalize(uow)
                spent[task] += time.perf_counter() - begun

            return commit

        return run

    settings = Settings(
        database_url=f"sqlite:///{work / 'bench.db'}",
        broker_url="inline://",
        secret="bench",
        index_dir=index_dir,
    )
    app = build_app(settings, memory_destinations=True)
    samples: list[dict[str, float]] = []
    originals = dict(app.handlers)
    for run in range(sagas + 1):
        spent: dict[str, float] = defaultdict(float)
        for task, _ in stages:
            app.handlers[task] = timed(originals[task], task, spent)
        start = time.perf_counter()
        out = app.submissions.submit(
            brief=BRIEF, corpus=str(corpus), destinations=[f"memory:b{run}"], actor="bench"
        )
        wall = time.perf_counter() - start
        if out["state"] != "ready-for-review":
            raise SystemExit(f"saga ended {out['state']}: {out.get('reason')}")
        if run:  # the first saga warms imports, the schema and the caches
            samples.append({**{name: spent[task] for task, name in stages}, "submit": wall})
    app.close()
    row: dict[str, Any] = {
        k: statistics.median(s[k] for s in samples) for k in ("research", "write", "review", "submit")
    }
    row["total"] = statistics.median(s["research"] + s["write"] + s["review"] for s in samples)
    row["saga_rss"] = _peak_mib()
    return row


def child_per_call(corpus: Path) -> dict[str, Any]:
    from roles.corpus import load_corpus
    from roles.ranking import collect_evidence

    collect_evidence(BRIEF, load_corpus(corpus))  # warm
    times = []
    for _ in range(3):
        start = time.perf_counter()
        collect_evidence(BRIEF, load_corpus(corpus))
        times.append(time.perf_counter() - start)
    return {"per_call": statistics.median(times)}


def _child(kind: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"child {kind} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the parent ------------------------------------------------------------------------


BASELINE = 1000
PAIRS = 3


def measure(sizes: list[int], sagas: int, rounds: int) -> list[dict[str, Any]]:
    """Each size in turn. The sagas of a size other than 1,000 files run in `PAIRS` children,
    each followed by a child running sagas on a 1,000-file corpus kept for the whole run; each
    side's figure is the median of its children's medians. So every ratio has a baseline
    measured beside it (the machine is shared: figures taken minutes apart move more than the
    goals allow)."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pressroom-bench-", dir="/tmp") as base_tmp:
        base = Path(base_tmp)
        make_corpus(base / "corpus", BASELINE)
        _child("build", str(base / "corpus"), str(base / "index"))
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix="pressroom-bench-", dir="/tmp") as tmp:
                corpus, index_dir = Path(tmp) / "corpus", Path(tmp) / "index"
                row: dict[str, Any] = {"files": size, "bytes": make_corpus(corpus, size)}
                print(f"  {size:,} files generated", file=sys.stderr, flush=True)
                row |= _child("build", str(corpus), str(index_dir))
                row |= _child("refresh", str(corpus), str(index_dir), str(rounds))
                if size == BASELINE:
                    row |= _sagas(Path(tmp), corpus, index_dir, sagas, "")
                else:
                    own: list[dict[str, Any]] = []
                    beside: list[dict[str, Any]] = []
                    for _ in range(PAIRS):
                        own.append(_sagas(Path(tmp), corpus, index_dir, sagas, ""))
                        beside.append(_sagas(base, base / "corpus", base / "index", sagas, "baseline_"))
                    row |= _medians(own) | _medians(beside)
                if size <= PER_CALL_MAX:
                    row |= _child("per_call", str(corpus))
                rows.append(row)
                print(f"  {size:,} files measured", file=sys.stderr, flush=True)
    return rows


def _medians(children: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(c[k] for c in children) for k in children[0]}


def _sagas(tmp: Path, corpus: Path, index_dir: Path, sagas: int, prefix: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="work-", dir=tmp))
    return {
        prefix + k: v for k, v in _child("sagas", str(corpus), str(index_dir), str(work), str(sagas)).items()
    }


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:,.1f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| files | corpus | index build s | build peak RSS | index file | refresh, none changed ms "
        "| refresh, one changed ms | bare walk ms | research ms | write ms | review ms "
        "| research + write + review ms | the same at 1,000 files, beside it | submit ms | saga peak RSS "
        "| research per call ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['files']:,} | {r['bytes'] / 2**20:,.1f} MiB | {r['build']:,.2f} | {r['build_rss']:,.0f} MiB "
            f"| {r['index_bytes'] / 2**20:,.1f} MiB | {_ms(r['refresh_none'])} | {_ms(r['refresh_one'])} "
            f"| {_ms(r['bare_walk'])} | {_ms(r['research'])} | {_ms(r['write'])} | {_ms(r['review'])} "
            f"| {_ms(r['total'])} | {_ms(r.get('baseline_total'))} | {_ms(r['submit'])} "
            f"| {r['saga_rss']:,.0f} MiB | {_ms(r.get('per_call'))} |"
        )
    return "\n".join(lines)


def goals(rows: list[dict[str, Any]]) -> list[str]:
    by = {r["files"]: r for r in rows}
    out: list[str] = []
    for size, goal in ((50000, 1.5), (100000, 2.0)):
        if size in by:
            r = by[size]
            ratio = r["total"] / r["baseline_total"]
            verdict = "met" if ratio <= goal else f"NOT met, {ratio - goal:.2f}x over"
            out.append(
                f"- Research + write + review per saga at {size:,} files within {goal}x of 1,000 files: "
                f"{_ms(r['total'])} ms against {_ms(r['baseline_total'])} ms measured beside it, {ratio:.2f}x, "
                f"{verdict} (research alone {r['research'] / r['baseline_research']:.2f}x)."
            )
    if 100000 in by:
        one, floor = by[100000]["refresh_one"], by[100000]["bare_walk"]
        ratio = one / floor
        verdict = "met" if ratio <= 1.2 else f"NOT met, {ratio - 1.2:.2f}x over"
        out.append(
            f"- Refresh after one change at 100,000 files within 1.2x of a bare scandir + stat walk of the "
            f"same tree: {one:.2f} s against {floor:.2f} s, {ratio:.2f}x, {verdict}."
        )
        out.append(
            f"- Peak memory at 100,000 files: {by[100000]['saga_rss']:,.0f} MiB for the process running the "
            f"sagas, {by[100000]['build_rss']:,.0f} MiB for the build."
        )
    return out


def section(rows: list[dict[str, Any]], command: str, sagas: int, rounds: int) -> str:
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    machine = f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join(
        [
            HEADING,
            "",
            f"Command: `{command}`  ",
            f"Date: {now}; {machine}; load average {load} when the runs ended.",
            "",
            "Generated corpora of small markdown files (three paragraphs of prose each; one file in ten also "
            "tells of the canal the brief asks about), indexed in the persistent corpus index (a SQLite record "
            "and a tantivy search index per corpus). Each phase runs in its own child process; peak RSS is that process's "
            "`ru_maxrss`. `research`, `write` and `review` are each role's handler (the planner loop through "
            "the harness) plus the commit of its result, on a warm index; `submit` is the whole "
            "`Submissions.submit` call, whose refresh stats every file of the corpus. `bare walk` is "
            "`os.scandir` and a stat of every entry of the same tree, interleaved with the one-change "
            f"refreshes in the same child (medians of {rounds} each). The sagas of each larger corpus "
            f"run in {PAIRS} children, each followed by a child running sagas on a 1,000-file corpus kept "
            "for the whole run, the baseline of its ratio (medians of the children's medians). Medians of "
            f"{sagas} sagas after one unmeasured warm-up saga. `research per call` is the path without the "
            "index (`collect_evidence(load_corpus())`, which re-reads and re-indexes the corpus every time), "
            "measured only up to 1,000 files.",
            "",
            table(rows),
            "",
            *goals(rows),
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


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "build": lambda c, i: child_build(Path(c), Path(i)),
    "refresh": lambda c, i, n: child_refresh(Path(c), Path(i), int(n)),
    "sagas": lambda c, i, w, n: child_sagas(Path(c), Path(i), Path(w), int(n)),
    "per_call": lambda c: child_per_call(Path(c)),
}


def main(argv: list[str] | None = None, write: Callable[[str], None] = write_section) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,50000,100000")
    parser.add_argument("--sagas", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child[0]](*args.child[1:])))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = measure(sizes, args.sagas, args.rounds)
    print(table(rows))
    print("\n".join(goals(rows)))
    if not args.no_write:
        shown = [a for a in (argv if argv is not None else sys.argv[1:])]
        command = " ".join(["nice -n 10 .venv/bin/python bench/roles_scaling.py", *shown])
        write(section(rows, command, args.sagas, args.rounds))
        print(f"wrote {HEADING!r} in {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Shared pieces of the bench scripts: statistics, tables, the benchmarks document,
throwaway PostgreSQL databases and the service URLs.

Not a bench itself (`run_all.py` skips files whose name starts with `_`).
Each bench owns exactly one `## ...` section of docs/benchmarks.md and
replaces only that section; the short machine header at the top is written
only when the file has none.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PG_ADMIN_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")


# -- statistics ---------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of `values`."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


class Stats:
    """Median, p99 and n of one series of samples (seconds in, milliseconds out)."""

    def __init__(self, name: str, samples: Sequence[float]) -> None:
        self.name = name
        self.samples = list(samples)
        self.n = len(self.samples)
        self.median = statistics.median(self.samples) if self.samples else math.nan
        self.p99 = percentile(self.samples, 99)

    @property
    def median_ms(self) -> float:
        return self.median * 1000.0

    @property
    def p99_ms(self) -> float:
        return self.p99 * 1000.0


def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1000.0
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 0.1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_x(value: float) -> str:
    return f"{value:.2f}×"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table (also readable as plain text on a terminal)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])


# -- the benchmarks document ----------------------------------------------------------


def machine_line() -> str:
    cpu = ""
    with contextlib.suppress(OSError):
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                cpu = text.split(":", 1)[1].strip()
                break
    return (
        f"`nproc` = {os.cpu_count()}{f' ({cpu})' if cpu else ''}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


PREAMBLE = """Machine: {machine}. PostgreSQL, Redis and RabbitMQ run locally on the same
machine as the bench processes (so every network hop is loopback), and the machine is shared: other
people's test runs may overlap a bench, which is why the benches that compare paths interleave them
and report ratios measured in the same run.

Each `## ...` section below is written by the bench script named in it and holds the exact command that
produced it; `make bench` (`bench/run_all.py`) runs them all. Median and p99 are nearest-rank over n
samples. Benchmarks are not tests: they assert nothing, they measure.
"""


def with_preamble(text: str) -> str:
    """`text` with the title and the machine preamble at the top, added only when absent."""
    preamble = PREAMBLE.format(machine=machine_line())
    if not text.lstrip().startswith("# "):
        return "# Benchmarks\n\n" + preamble + ("\n" + text.lstrip() if text.strip() else "")
    head, sep, rest = text.partition("\n## ")
    if "Machine:" in head:
        return text
    title, _, intro = head.partition("\n")
    intro = intro.strip()
    rebuilt = title + "\n\n" + preamble + ("\n" + intro + "\n" if intro else "")
    return rebuilt + ("\n## " + rest if sep else "")


def command_line() -> str:
    rel = Path(sys.argv[0]).resolve()
    with contextlib.suppress(ValueError):
        rel = rel.relative_to(ROOT)
    return " ".join([".venv/bin/python", shlex.quote(str(rel)), *map(shlex.quote, sys.argv[1:])])


def write_section(title: str, body: str, doc: Path = DOC) -> None:
    """Replace (or append) the section `## {title}` of the document, leaving the rest alone."""
    doc.parent.mkdir(parents=True, exist_ok=True)
    text = with_preamble(doc.read_text() if doc.exists() else "")
    heading = f"## {title}"
    section = f"{heading}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^{re.escape(heading)}[ \t]*\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section + "\n", text, count=1)
    else:
        text = text.rstrip() + "\n\n" + section
    text = text.rstrip() + "\n"
    tmp = doc.with_suffix(f".md.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, doc)


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


# -- services -----------------------------------------------------------------------------


@contextlib.contextmanager
def pg_database(prefix: str) -> Iterator[str]:
    """A fresh PostgreSQL database for one bench, dropped afterwards."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    plain = PG_ADMIN_URL.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        from orchestrator.store import db as store_db

        store_db.dispose_all()
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def flush_redis(url: str = REDIS_URL) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def bench_env(**extra: str) -> dict[str, str]:
    """The environment for a child process: no inherited PRESSROOM_/OTEL_ settings, tracing off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRESSROOM_", "OTEL_"))}
    env["OTEL_TRACES_EXPORTER"] = "none"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def no_flush_wait(engine: object) -> None:
    """Every new connection of `engine` runs with `synchronous_commit = off` (PostgreSQL).

    Bench experiments only: commits stop waiting for the WAL flush.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: object, _record: object) -> None:
        cur = dbapi_conn.cursor()  # type: ignore[attr-defined]
        cur.execute("SET synchronous_commit = off")
        cur.close()
        dbapi_conn.commit()  # type: ignore[attr-defined]


def git_rev() -> str:
    with contextlib.suppress(Exception):
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        dirty = subprocess.run(
            # The benchmarks' own output file is not code they measure.
            [
                "git",
                "-C",
                str(ROOT),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!docs/benchmarks.md",
            ],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return out.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")
    return "unknown"


__all__ = [
    "DOC",
    "PG_ADMIN_URL",
    "REDIS_URL",
    "ROOT",
    "Stats",
    "bench_env",
    "command_line",
    "flush_redis",
    "fmt_ms",
    "fmt_x",
    "git_rev",
    "machine_line",
    "no_flush_wait",
    "percentile",
    "pg_database",
    "ratio",
    "stamp",
    "table",
    "write_section",
]


def dbos_available() -> bool:
    """Whether the optional `bench` extra (DBOS Transact) is installed."""
    import importlib.util

    return importlib.util.find_spec("dbos") is not None


def run_dbos(*args: str) -> dict[str, object]:
    """`bench/_dbos_noop.py` with `args` on a fresh database of the bench server: its JSON line."""
    import json

    with pg_database("pressroom_bench_dbos") as url:
        plain = url.replace("postgresql+psycopg", "postgresql")
        done = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "_dbos_noop.py"), plain, *args],
            capture_output=True,
            text=True,
            timeout=900,
            env=bench_env(),
        )
    if done.returncode != 0:
        raise RuntimeError(f"bench/_dbos_noop.py failed: {done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result

"""Soak instruments: each process's memory and descriptors, and the database's size, over a
long run; how much they grew; and what `pressroom prune` gives back.

`Sampler` is a thread that every `interval` seconds writes one JSON line: the time, the
database's size (`pg_database_size`; None on another database) and, for each process the
supervisor manages, its PID, its descendants' PIDs and, summed over the process and its
descendants (a worker's pool children, the publisher child), RSS in kB (`VmRSS` in
/proc/PID/status) and open descriptors (entries of /proc/PID/fd). A new PID is noted as a
restart (`"restart": true`).

The rest is pure, over those lines. `growth` compares, per process, the median of the
first `k` samples after the warm-up with the median of the last `k` (k = 3 by default;
the median keeps one sample taken mid-burst from deciding), within the samples of the
process's last PID only: memory a restart gave back is not counted, and the restarts are
reported. RSS growth is in %, descriptor growth in descriptors. `prune_and_measure` runs
`pressroom prune --older-than AGE --json` and measures the database before, after the
prune, after a plain `VACUUM` (what autovacuum does: the space is reusable, the files
rarely shrink) and after `VACUUM FULL` (the tables rewritten: what the kept rows take).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Engine

from chaos.observe import cli

PROC = Path("/proc")
WARMUP_SECONDS = 600.0
SAMPLE_SECONDS = 60.0
SAMPLES_FILE = "soak-samples.jsonl"
EDGE_SAMPLES = 3


class Supervised(Protocol):
    """What the sampler needs of the supervisor: each managed process's current PID."""

    def pids(self) -> dict[str, int | None]: ...


@dataclass(frozen=True)
class Growth:
    process: str
    pid: int
    samples: int  # after the warm-up, of this PID
    restarts: int  # over the whole run
    rss_first_kb: int
    rss_last_kb: int
    rss_growth_pct: float
    fds_first: int
    fds_last: int
    fds_growth: int


# -- reading /proc ----------------------------------------------------------------
def rss_kb(status: str) -> int | None:
    """`VmRSS` in kB from the text of /proc/PID/status (None: a kernel thread or a zombie)."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def descendants(pid: int, proc: Path = PROC) -> list[int]:
    """Every descendant of `pid`, read from each of its threads' `children` file (a child
    started from a thread other than the main one is listed under that thread)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        for children in sorted((proc / str(current) / "task").glob("*/children")):
            with contextlib.suppress(OSError):
                for child in (int(p) for p in children.read_text().split()):
                    if child not in found:
                        found.append(child)
                        todo.append(child)
    return found


def measure(pid: int, proc: Path = PROC) -> tuple[int, int]:
    """(RSS kB, open descriptors) of one process; (0, 0) once it is gone."""
    try:
        rss = rss_kb((proc / str(pid) / "status").read_text()) or 0
        fds = sum(1 for _ in (proc / str(pid) / "fd").iterdir())
    except OSError:
        return 0, 0
    return rss, fds


def database_bytes(engine: Engine) -> int | None:
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())


class Sampler(threading.Thread):
    """Writes one sample line to `path` every `interval` seconds until `stop()`."""

    def __init__(
        self,
        supervisor: Supervised,
        engine: Engine,
        path: Path,
        *,
        interval: float = SAMPLE_SECONDS,
        clock: Callable[[], float] = time.time,
        proc: Path = PROC,
    ) -> None:
        super().__init__(daemon=True, name="soak-sampler")
        self.supervisor, self.engine, self.path = supervisor, engine, path
        self.interval, self.clock, self.proc = interval, clock, proc
        self._stop_event = threading.Event()
        self._last_pid: dict[str, int] = {}
        self.errors = 0

    def sample(self) -> dict[str, Any]:
        procs: dict[str, Any] = {}
        for name, pid in sorted(self.supervisor.pids().items()):
            if pid is None:
                procs[name] = None
                continue
            family = [pid, *descendants(pid, self.proc)]
            figures = [measure(p, self.proc) for p in family]
            procs[name] = {
                "pid": pid,
                "children": family[1:],
                "rss_kb": sum(r for r, _ in figures),
                "fds": sum(f for _, f in figures),
                "restart": name in self._last_pid and self._last_pid[name] != pid,
            }
            self._last_pid[name] = pid
        try:
            size = database_bytes(self.engine)
        except Exception:  # the database restarting (a nemesis fault): the next sample has it
            self.errors += 1
            size = None
        return {"at": self.clock(), "db_bytes": size, "procs": procs}

    def run(self) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            while True:
                out.write(json.dumps(self.sample()) + "\n")
                out.flush()
                if self._stop_event.wait(self.interval):
                    return

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=30)


def read_samples(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- pure figures ---------------------------------------------------------------------
def _edge(values: list[int], k: int) -> tuple[float, float]:
    k = max(1, min(k, len(values) // 2 or 1))
    return statistics.median(values[:k]), statistics.median(values[-k:])


def growth(
    samples: Iterable[dict[str, Any]], *, warmup: float = WARMUP_SECONDS, k: int = EDGE_SAMPLES
) -> list[Growth]:
    """Per process, growth from the first samples after `warmup` seconds (counted from the
    first sample) to the last ones, within its last PID's samples; a process with fewer
    than two such samples is left out."""
    rows = sorted(samples, key=lambda s: s["at"])
    if not rows:
        return []
    start = rows[0]["at"]
    series: dict[str, list[tuple[int, int, int]]] = {}
    restarts: dict[str, int] = {}
    for row in rows:
        for name, p in row["procs"].items():
            if p is None:
                continue
            restarts[name] = restarts.get(name, 0) + int(bool(p.get("restart")))
            if row["at"] - start >= warmup:
                series.setdefault(name, []).append((p["pid"], p["rss_kb"], p["fds"]))
    out = []
    for name, points in sorted(series.items()):
        pid = points[-1][0]
        mine = [pt for pt in points if pt[0] == pid]
        if len(mine) < 2:
            continue
        rss_first, rss_last = _edge([pt[1] for pt in mine], k)
        fds_first, fds_last = _edge([pt[2] for pt in mine], k)
        out.append(
            Growth(
                process=name,
                pid=pid,
                samples=len(mine),
                restarts=restarts.get(name, 0),
                rss_first_kb=round(rss_first),
                rss_last_kb=round(rss_last),
                rss_growth_pct=round((rss_last - rss_first) / rss_first * 100, 1) if rss_first else 0.0,
                fds_first=round(fds_first),
                fds_last=round(fds_last),
                fds_growth=round(fds_last - fds_first),
            )
        )
    return out


def database_figures(
    samples: Iterable[dict[str, Any]], prune: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The database's size at the first and the last sample, and what `prune_and_measure` found."""
    sizes = [s["db_bytes"] for s in sorted(samples, key=lambda s: s["at"]) if s.get("db_bytes") is not None]
    out: dict[str, Any] = {
        "first_bytes": sizes[0] if sizes else None,
        "last_bytes": sizes[-1] if sizes else None,
    }
    if prune is not None:
        out.update(
            {k: prune[k] for k in ("after_prune_bytes", "after_vacuum_bytes", "after_vacuum_full_bytes")}
        )
        out["pruned_rows"] = prune.get("total")
    return out


def _mb(n: int | None) -> str:
    return "–" if n is None else f"{n / 1_048_576:.1f} MB"


def markdown_table(growths: list[Growth], db: dict[str, Any], *, warmup: float = WARMUP_SECONDS) -> str:
    """Two tables for the report: per process, then the database."""
    lines = [
        f"Growth after a {warmup / 60:.0f}-minute warm-up, median of the first and of the last "
        f"{EDGE_SAMPLES} samples of each process's last PID (RSS and descriptors summed over its children):",
        "",
        "| process | samples | restarts | RSS first → last | RSS growth | descriptors first → last |",
        "|---|---|---|---|---|---|",
    ]
    for g in growths:
        lines.append(
            f"| {g.process} | {g.samples} | {g.restarts} | {g.rss_first_kb / 1024:.1f} → {g.rss_last_kb / 1024:.1f} MB"
            f" | {g.rss_growth_pct:+.1f} % | {g.fds_first} → {g.fds_last} ({g.fds_growth:+d}) |"
        )
    lines += [
        "",
        "| database | size |",
        "|---|---|",
        f"| at the first sample | {_mb(db.get('first_bytes'))} |",
        f"| at the last sample | {_mb(db.get('last_bytes'))} |",
    ]
    if "after_prune_bytes" in db:
        lines += [
            f"| after `pressroom prune` ({db.get('pruned_rows')} rows) | {_mb(db['after_prune_bytes'])} |",
            f"| after `VACUUM` | {_mb(db['after_vacuum_bytes'])} |",
            f"| after `VACUUM FULL` | {_mb(db['after_vacuum_full_bytes'])} |",
        ]
    return "\n".join(lines) + "\n"


# -- prune, through the CLI ------------------------------------------------------------
def prune_and_measure(
    env: dict[str, str], engine: Engine, older_than: str, *, actor: str = "oscar"
) -> dict[str, Any]:
    """`pressroom prune --older-than AGE --as ACTOR --json`, then the sizes after it, after
    `VACUUM` and after `VACUUM FULL`. Ledger rows younger than PRESSROOM_RECONCILE_WINDOW
    (default 7d) stay whatever the age: set it in `env` to measure them going too."""
    before = database_bytes(engine)
    done = cli(env, "prune", "--older-than", older_than, "--as", actor)
    if done.code != 0 or done.out is None:
        raise RuntimeError(
            f"pressroom prune: exit {done.code}: {done.err.splitlines()[-1] if done.err else ''}"
        )
    after = database_bytes(engine)
    sizes = {}
    for what, sql in (("after_vacuum_bytes", "VACUUM"), ("after_vacuum_full_bytes", "VACUUM FULL")):
        if engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text(sql))
        sizes[what] = database_bytes(engine)
    return {
        "older_than": older_than,
        "before_bytes": before,
        "after_prune_bytes": after,
        **sizes,
        "sagas": done.out.get("sagas"),
        "rows": done.out.get("rows"),
        "total": done.out.get("total"),
        "seconds": done.out.get("seconds"),
    }


def growth_dicts(growths: list[Growth]) -> list[dict[str, Any]]:
    return [asdict(g) for g in growths]


__all__ = [
    "EDGE_SAMPLES",
    "SAMPLES_FILE",
    "SAMPLE_SECONDS",
    "WARMUP_SECONDS",
    "Growth",
    "Sampler",
    "Supervised",
    "database_bytes",
    "database_figures",
    "descendants",
    "growth",
    "growth_dicts",
    "markdown_table",
    "measure",
    "prune_and_measure",
    "read_samples",
    "rss_kb",
]

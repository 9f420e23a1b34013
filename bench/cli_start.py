"""CLI cold start: `pressroom --help`, `status` and `show` against bare Python and `import click`.

    .venv/bin/python bench/cli_start.py [--rounds 20] [--pg-rounds 5]

Each sample is a fresh process (`subprocess.run`, output to /dev/null), timed
from spawn to exit. The rows are interleaved: one round runs every command
once, in the same order, so a busy moment of the shared machine hits them
alike. `status` and `show` read a SQLite database holding one saga in
`ready-for-review` (submitted once before the rounds, sample corpus, a
`site:` destination in the temporary folder), with tracing off. `import sqlmodel` is the floor of
any command that reads the database through the store (SQLAlchemy and
SQLModel imported, nothing run). The goal: `--help` and `status` within 2× of
`python -c "import click"` in the same run.

`status` and `show` take the quick path (`orchestrator/entrypoints/fast_reads.py`:
the standard library's sqlite3, no pydantic, no rich when piped); the row
`pressroom status (full path)` runs the same command with one more setting
(`PRESSROOM_MAX_ATTEMPTS`) that sends it through `Settings()` and the store,
as every command did before. Children run without PYTHONDONTWRITEBYTECODE,
so they load bytecode caches as an installed package does.

A second table measures CPU time (user + system of the child, from `wait4`)
on PostgreSQL in closed mode (`BENCH_DATABASE_URL`'s server, a fresh
database; an admin, an author and a reviewer; each command with the
reviewer's token): `status` and `show` on the quick path
(`orchestrator/reads/pg_reads.py`, psycopg alone), `status` on the full path (the
same extra setting), and `approve`, which runs the store's full path and,
with the inline broker, the publish it starts (one saga per round, submitted
before the rounds). Goal: at most 0.5 s of CPU for `status`, `show` and
`approve`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ROOT,
    Stats,
    command_line,
    fmt_ms,
    fmt_x,
    git_rev,
    pg_database,
    ratio,
    stamp,
    table,
    write_section,
)

TITLE = "CLI start time"
GOAL = 2.0
CPU_GOAL = 0.5  # seconds of CPU for status, show and approve on PostgreSQL in closed mode


def _env(db: Path) -> dict[str, str]:
    # Bytecode caches as an installed package has them: the warm-up submit writes any that are missing.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PRESSROOM_", "OTEL_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        PRESSROOM_DATABASE_URL=f"sqlite:///{db}",
        PRESSROOM_BROKER_URL="inline://",
        PRESSROOM_SECRET="bench-signing-key",
    )
    return env


def _time(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _cpu(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process: spawn to exit, and its user + system time."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read().decode() if child.stderr else ""
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])}: exit {child.returncode}: {err[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _json(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, object]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])}: exit {done.returncode}: {done.stderr[-500:]}")
    out: dict[str, object] = json.loads(done.stdout)
    return out


def postgres_closed(pressroom: str, python: str, rounds: int) -> tuple[str, dict[str, Stats]]:
    """The PostgreSQL closed-mode table: (markdown, CPU stats by row)."""
    with tempfile.TemporaryDirectory(prefix="pr-cli-start-pg-") as tmp, pg_database("pr_cli_start") as url:
        work = Path(tmp)
        env = {**_env(work / "unused.db"), "PRESSROOM_DATABASE_URL": url}
        roles = ["--role", "admin", "--role", "author", "--role", "reviewer"]
        admin = str(_json([pressroom, "users", "add", "root", *roles, "--json"], env, work)["token"])
        as_admin = {**env, "PRESSROOM_TOKEN": admin}
        author = str(
            _json([pressroom, "users", "add", "dana", "--role", "author", "--json"], as_admin, work)["token"]
        )
        reviewer = str(
            _json([pressroom, "users", "add", "erin", "--role", "reviewer", "--json"], as_admin, work)[
                "token"
            ]
        )
        as_author, as_reviewer = {**env, "PRESSROOM_TOKEN": author}, {**env, "PRESSROOM_TOKEN": reviewer}
        corpus = str(ROOT / "roles" / "sample_corpus")
        sagas = [
            str(
                _json(
                    [pressroom, "submit", "--brief", "the library network", "--corpus", corpus,
                     "--dest", f"site:{work / f'site-{i}'}", "--json"],
                    as_author,
                    work,
                )["saga_id"]
            )
            for i in range(rounds + 1)
        ]  # fmt: skip
        shown = sagas[-1]
        rows: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([python, "-c", "pass"], env),
            'python -c "import click"': ([python, "-c", "import click"], env),
            "pressroom status SAGA": ([pressroom, "status", shown], as_reviewer),
            "pressroom show SAGA": ([pressroom, "show", shown], as_reviewer),
            "pressroom status SAGA (full path)": (
                [pressroom, "status", shown],
                {**as_reviewer, "PRESSROOM_MAX_ATTEMPTS": "5"},
            ),
            "pressroom approve SAGA --version 1": ([], as_reviewer),
        }
        wall: dict[str, list[float]] = {name: [] for name in rows}
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        for i in range(rounds):
            for name, (argv, row_env) in rows.items():
                if not argv:  # approve: a saga of its own each round
                    argv = [pressroom, "approve", sagas[i], "--version", "1"]
                w, c = _cpu(argv, row_env, work)
                wall[name].append(w)
                cpu[name].append(c)
    stats = {name: Stats(name, values) for name, values in cpu.items()}
    lines = []
    for name in rows:
        goal = ""
        if (
            name.startswith(("pressroom status SAGA", "pressroom show", "pressroom approve"))
            and "full" not in name
        ):
            goal = "met" if stats[name].median <= CPU_GOAL else "NOT met"
        lines.append(
            [name, fmt_ms(stats[name].median), fmt_ms(Stats(name, wall[name]).median), len(cpu[name]), goal]
        )
    headers = ["command", "CPU median ms", "wall median ms", "n", f"goal ≤{CPU_GOAL * 1000:g} ms CPU"]
    return table(headers, lines), stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pg-rounds", type=int, default=5, help="rounds of the PostgreSQL closed-mode table")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    opts = parser.parse_args()
    python = sys.executable
    pressroom = str(Path(python).parent / "pressroom")
    with tempfile.TemporaryDirectory(prefix="pr-cli-start-") as tmp:
        work = Path(tmp)
        env = _env(work / "bench.db")
        corpus = str(ROOT / "roles" / "sample_corpus")
        submitted = subprocess.run(
            [
                pressroom,
                "submit",
                "--brief",
                "the library network",
                "--corpus",
                corpus,
                "--dest",
                f"site:{work / 'site'}",
                "--as",
                "bench",
                "--json",
            ],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        )
        saga_id = json.loads(submitted.stdout)["saga_id"]
        commands = {
            "python -c pass": [python, "-c", "pass"],
            'python -c "import click"': [python, "-c", "import click"],
            'python -c "import sqlmodel"': [python, "-c", "import sqlmodel"],
            "pressroom --help": [pressroom, "--help"],
            "pressroom status": [pressroom, "status"],
            "pressroom show SAGA": [pressroom, "show", saga_id],
            "pressroom status (full path)": [pressroom, "status"],
        }
        envs = {name: env for name in commands}
        envs["pressroom status (full path)"] = {**env, "PRESSROOM_MAX_ATTEMPTS": "5"}
        samples: dict[str, list[float]] = {name: [] for name in commands}
        started = stamp()
        for _ in range(opts.rounds):
            for name, argv in commands.items():
                samples[name].append(_time(argv, envs[name], work))
    pg_table, pg = postgres_closed(pressroom, python, opts.pg_rounds)
    stats = {name: Stats(name, values) for name, values in samples.items()}
    click_median = stats['python -c "import click"'].median
    rows = []
    for name, s in stats.items():
        x = ratio(s.median, click_median)
        goal = ""
        if name in ("pressroom --help", "pressroom status"):
            goal = "met" if x <= GOAL else "NOT met"
        rows.append([name, fmt_ms(s.median), fmt_ms(s.p99), s.n, fmt_x(x), goal])
    verdicts = []
    for name in ("pressroom --help", "pressroom status"):
        x = ratio(stats[name].median, click_median)
        verdicts.append(
            f"`{name}` {fmt_x(x)}: {'met' if x <= GOAL else 'NOT met'}, {abs(GOAL - x):.2f}× "
            f"{'under' if x <= GOAL else 'over'} the {GOAL:g}× limit"
        )
    full = ratio(stats["pressroom status (full path)"].median, stats["pressroom status"].median)
    body = "\n\n".join(
        [
            f"Written by `bench/cli_start.py`, {started}, code at {git_rev()}. Command: `{command_line()}`.",
            "Each sample is a fresh process, spawn to exit; the rows run interleaved, one of each per round. "
            "`status` and `show` read a SQLite database with one saga (tracing off). Goal: `--help` and "
            f"`status` within {GOAL:g}× of `import click`.",
            table(["command", "median ms", "p99 ms", "n", "× import click", f"goal ≤{GOAL:g}×"], rows),
            "Goal: "
            + "; ".join(verdicts)
            + f". The quick `status` takes 1/{full:.1f} of the full path's time.",
            "`status` and `show` read the SQLite file with the standard library (`fast_reads`: no SQLAlchemy, "
            "pydantic or rich; same bytes as the full path, `tests/e2e/test_read_paths.py`). "
            "`status (full path)` is the same command sent through `Settings()` and the store by one more "
            "setting, as every read ran before; `import sqlmodel` is that path's floor. Children load "
            "bytecode caches (PYTHONDONTWRITEBYTECODE unset), as an installed package does.",
            "### PostgreSQL, closed mode: CPU per command",
            "The same kind of samples on a fresh PostgreSQL database in closed mode (an admin, an author, "
            "a reviewer; every command with the reviewer's token), interleaved, one of each per round; "
            "CPU is the child's user + system time. `status` and `show` take the quick path "
            "(`orchestrator/reads/pg_reads.py`: psycopg alone, no SQLAlchemy, SQLModel, Alembic or pydantic); "
            "`status SAGA (full path)` is the same command sent through `Settings()` and the store, as "
            f"every read on PostgreSQL ran before; `approve` approves a saga of its own each round. Goal: "
            f"`status`, `show` and `approve` at most {CPU_GOAL:g} s of CPU.",
            pg_table,
            _approve_verdict(pg),
        ]
    )
    print(body)
    if not opts.no_write:
        write_section(TITLE, body)


def _approve_verdict(pg: dict[str, Stats]) -> str:
    approve = pg["pressroom approve SAGA --version 1"].median
    full = pg["pressroom status SAGA (full path)"].median
    quick = pg["pressroom status SAGA"].median
    over = approve - CPU_GOAL
    verdict = (
        f"`approve` is {'within' if over <= 0 else 'NOT within'} the goal: {approve:.2f} s of CPU, "
        f"{abs(over):.2f} s {'under' if over <= 0 else 'over'} {CPU_GOAL:g} s."
    )
    return (
        f"The quick `status` takes {quick:.2f} s of CPU, 1/{ratio(full, quick):.1f} of the full path's "
        f"{full:.2f} s. {verdict} What stands in the way: `approve` runs the use case on the store "
        "(SQLAlchemy, SQLModel and pydantic: the full path's read alone costs the figure above), builds "
        "the whole application (every tool, the corpus index, the publisher), and with the inline broker "
        "publishes in the same process (the page renderer, the destination, the events of each phase). "
        "Alembic is no longer loaded by a database already at the head migration (one query of "
        "`alembic_version` against the head read from the migration files)."
    )


if __name__ == "__main__":
    main()

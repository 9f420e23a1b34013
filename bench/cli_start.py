"""CLI cold start: `pressroom --help`, `status` and `show` against bare Python and `import click`.

    .venv/bin/python bench/cli_start.py [--rounds 20]

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

from _common import ROOT, Stats, command_line, fmt_ms, fmt_x, git_rev, ratio, stamp, table, write_section  # noqa: E402

TITLE = "CLI start time"
GOAL = 2.0


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
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
        ]
    )
    print(body)
    if not opts.no_write:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()

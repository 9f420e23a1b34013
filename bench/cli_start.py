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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRESSROOM_", "OTEL_"))}
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
            [pressroom, "submit", "--brief", "the library network", "--corpus", corpus, "--dest", f"site:{work / 'site'}",
             "--as", "bench", "--json"],
            env=env, cwd=work, capture_output=True, text=True, check=True,
        )
        saga_id = json.loads(submitted.stdout)["saga_id"]
        commands = {
            "python -c pass": [python, "-c", "pass"],
            'python -c "import click"': [python, "-c", "import click"],
            'python -c "import sqlmodel"': [python, "-c", "import sqlmodel"],
            "pressroom --help": [pressroom, "--help"],
            "pressroom status": [pressroom, "status"],
            "pressroom show SAGA": [pressroom, "show", saga_id],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        started = stamp()
        for _ in range(opts.rounds):
            for name, argv in commands.items():
                samples[name].append(_time(argv, env, work))
    stats = {name: Stats(name, values) for name, values in samples.items()}
    click_median = stats['python -c "import click"'].median
    rows = []
    for name, s in stats.items():
        x = ratio(s.median, click_median)
        goal = ""
        if name in ("pressroom --help", "pressroom status"):
            goal = "met" if x <= GOAL else "NOT met"
        rows.append([name, fmt_ms(s.median), fmt_ms(s.p99), s.n, fmt_x(x), goal])
    body = "\n\n".join(
        [
            f"Written by `bench/cli_start.py`, {started}, code at {git_rev()}. Command: `{command_line()}`.",
            "Each sample is a fresh process, spawn to exit; the rows run interleaved, one of each per round. "
            "`status` and `show` read a SQLite database with one saga (tracing off). Goal: `--help` and "
            f"`status` within {GOAL:g}× of `import click`.",
            table(["command", "median ms", "p99 ms", "n", "× import click", f"goal ≤{GOAL:g}×"], rows),
            "`import sqlmodel` is the floor of every command that reads the database through the store: "
            "SQLAlchemy and SQLModel imported, nothing run. `--help` imports neither (nor Celery or the "
            "OpenTelemetry SDK: `tests/e2e/test_cli_start.py`); `status` and `show` cannot come within "
            "2× of `import click` while that floor alone is above it.",
        ]
    )
    print(body)
    if not opts.no_write:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()

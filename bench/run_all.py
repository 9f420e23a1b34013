"""Run every bench script in sequence (`make bench` calls this).

    .venv/bin/python bench/run_all.py [--only NAME ...]

Each script measures, prints its table and replaces only its own `## ...`
section of docs/benchmarks.md. Files whose name starts with `_` are helpers,
not benches. A failing bench is reported and the others still run; the exit
status is 1 when any failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ORDER = ["handoff", "harness_throughput", "publish_latency", "tracing_overhead", "roles_scaling"]


def benches() -> list[Path]:
    found = {p.stem: p for p in HERE.glob("*.py") if not p.name.startswith("_") and p.stem != "run_all"}
    ordered = [found.pop(name) for name in ORDER if name in found]
    return ordered + [found[name] for name in sorted(found)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="run only these benches (file stems)")
    opts = parser.parse_args()
    selected = [p for p in benches() if opts.only is None or p.stem in opts.only]
    outcomes: list[tuple[str, int, float]] = []
    for script in selected:
        print(f"\n=== {script.relative_to(ROOT)} ===", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(script)], cwd=ROOT)
        outcomes.append((script.name, code, time.monotonic() - started))
    print("\n=== summary ===")
    for name, code, seconds in outcomes:
        print(f"{name:28} {'ok' if code == 0 else f'FAILED (exit {code})':18} {seconds:6.1f} s")
    return 0 if all(code == 0 for _, code, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

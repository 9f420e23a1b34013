"""`python -m chaos [--sagas N] [--seed S] ...`: one chaos run; exit 0 when the checker finds nothing."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from chaos.run import Options, run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    p.add_argument("--sagas", type=int, default=60, help="sagas to submit (default 60)")
    p.add_argument("--seed", type=int, default=1, help="the nemesis schedule's seed (default 1)")
    p.add_argument(
        "--fault-seconds",
        type=float,
        default=150.0,
        help="longest time the nemesis runs; it stops earlier once every saga settled (default 150)",
    )
    p.add_argument(
        "--settle-seconds",
        type=float,
        default=150.0,
        help="time given to settle after the faults stop (default 150)",
    )
    p.add_argument("--parallel", type=int, default=3, help="CLI commands run at once (default 3)")
    p.add_argument("--out", type=Path, default=Path("chaos/out"), help="where run folders go")
    p.add_argument(
        "--docs", type=Path, default=Path("docs/reliability.md"), help="the page to write the report to"
    )
    p.add_argument("--no-docs", action="store_true", help="write only the run folder's report")
    args = p.parse_args(argv)
    if args.sagas < 1 or args.fault_seconds <= 0 or args.settle_seconds <= 0 or args.parallel < 1:
        print(
            "chaos: --sagas, --parallel, --fault-seconds and --settle-seconds must be positive",
            file=sys.stderr,
        )
        return 2
    shown = ["make chaos"] + (
        [f"CHAOS_ARGS={shlex.quote(' '.join(argv or sys.argv[1:]))}"] if (argv or sys.argv[1:]) else []
    )
    opts = Options(
        sagas=args.sagas,
        seed=args.seed,
        fault_seconds=args.fault_seconds,
        settle_seconds=args.settle_seconds,
        parallel=args.parallel,
        out=args.out,
        docs=None if args.no_docs else args.docs,
        command=" ".join(shown),
    )
    return run(opts)


if __name__ == "__main__":
    raise SystemExit(main())

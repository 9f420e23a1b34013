"""`python -m chaos [--sagas N] [--seed S] ...`: one chaos run; exit 0 when the checker finds
nothing, 1 when it finds something, 2 on a bad option.

`python -m chaos upgrade --from REF [--sagas N] ...`: a rolling upgrade from REF's release
to this tree under load (chaos/upgrade.py); exit 0 when every check passes, 1 on a
finding, 2 on a bad option or when it cannot be carried out (a REF that is not a commit,
a release whose processes do not start).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path
from typing import NoReturn

from chaos import defaults, figures, soak
from chaos.links import Proxied
from chaos.routes import Direct
from chaos.run import Options, run
from chaos.upgrade import UpgradeOptions, upgrade

# A soak's pace: about 1,000 sagas an hour, and a fault every 15 s on average.
SOAK_ARRIVAL_SECONDS = 3.6
SOAK_FAULT_GAP = 15.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"chaos: {message}", file=sys.stderr)
        raise SystemExit(2)


def options(argv: list[str]) -> Options | str:
    """The run's options, or the one-line reason they are refused."""
    p = _Parser(prog="python -m chaos", description=__doc__)
    p.add_argument(
        "--sagas",
        type=int,
        default=None,
        help=f"sagas to submit (default 60; in a soak, one every {SOAK_ARRIVAL_SECONDS:.1f} s)",
    )
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
        default=defaults.SETTLE_SECONDS,
        help="time given to settle after the faults stop, and again after the operator's "
        f"reconciles and retries (default {defaults.SETTLE_SECONDS:.0f}: four default leases)",
    )
    p.add_argument(
        "--calm-sagas",
        type=int,
        default=None,
        help="of the sagas, how many run before the first fault, as the baseline "
        "(default a tenth of --sagas, at least 1)",
    )
    p.add_argument(
        "--recovery-margin",
        type=float,
        default=figures.RECOVERY_MARGIN,
        help="seconds after a fault's end during which a saga still counts as under it "
        f"(default {figures.RECOVERY_MARGIN:.0f})",
    )
    p.add_argument(
        "--direct",
        action="store_true",
        help="the processes reach PostgreSQL and Redis directly, not through the suite's TCP "
        "proxies: no link faults",
    )
    p.add_argument("--parallel", type=int, default=3, help="CLI commands run at once (default 3)")
    p.add_argument("--out", type=Path, default=Path("chaos/out"), help="where run folders go")
    p.add_argument(
        "--docs",
        default="docs/reliability.md",
        help="the page to write the report to; 'none': only the run folder's report",
    )
    p.add_argument("--no-docs", action="store_true", help="the same as --docs none")
    p.add_argument(
        "--soak-minutes",
        type=float,
        default=None,
        help="a soak: sagas arrive steadily and faults strike (one every "
        f"{SOAK_FAULT_GAP:.0f} s on average) for this many minutes, while every process's memory "
        "and descriptors and the database's size are sampled; then prune is measured",
    )
    p.add_argument(
        "--sample-seconds",
        type=float,
        default=soak.SAMPLE_SECONDS,
        help=f"in a soak, seconds between two samples (default {soak.SAMPLE_SECONDS:.0f})",
    )
    args = p.parse_args(argv)
    soaking = args.soak_minutes is not None
    if soaking and (args.soak_minutes <= 0 or args.sample_seconds <= 0):
        return "--soak-minutes and --sample-seconds must be positive"
    if soaking:
        args.fault_seconds = args.soak_minutes * 60
    if args.sagas is None:
        args.sagas = max(2, round(args.fault_seconds / SOAK_ARRIVAL_SECONDS)) if soaking else 60
    if (
        args.sagas < 1
        or args.fault_seconds <= 0
        or args.settle_seconds <= 0
        or args.parallel < 1
        or args.recovery_margin < 0
    ):
        return (
            "--sagas, --parallel, --fault-seconds and --settle-seconds must be positive, "
            "--recovery-margin not negative"
        )
    calm = min(max(1, args.sagas // 10), args.sagas - 1) if args.calm_sagas is None else args.calm_sagas
    if not 0 <= calm < args.sagas:
        return "--calm-sagas must be at least 0 and fewer than --sagas"
    shown = ["make chaos"] + ([f"CHAOS_ARGS={shlex.quote(' '.join(argv))}"] if argv else [])
    return Options(
        sagas=args.sagas,
        seed=args.seed,
        fault_seconds=args.fault_seconds,
        settle_seconds=args.settle_seconds,
        parallel=args.parallel,
        out=args.out,
        recovery_margin=args.recovery_margin,
        calm_sagas=calm,
        docs=None if args.no_docs or args.docs == "none" else Path(args.docs),
        command=" ".join(shown),
        route=Direct() if args.direct else Proxied(seed=args.seed),
        soak=soaking,
        sample_seconds=args.sample_seconds,
        fault_gap=SOAK_FAULT_GAP if soaking else 4.5,
    )


def upgrade_options(argv: list[str]) -> UpgradeOptions | str:
    """The rolling upgrade's options, or the one-line reason they are refused."""
    p = _Parser(prog="python -m chaos upgrade", description=__doc__)
    p.add_argument(
        "--from", dest="ref", required=True, help="the release to upgrade from: a commit, tag or branch"
    )
    p.add_argument(
        "--sagas",
        type=int,
        default=20,
        help="sagas submitted before the upgrade (half) and after it (the rest); "
        "more arrive during it (default 20)",
    )
    p.add_argument("--gap", type=float, default=3.0, help="seconds between two submits (default 3)")
    p.add_argument(
        "--step-seconds",
        type=float,
        default=8.0,
        help="seconds of load before each process's restart (default 8)",
    )
    p.add_argument("--settle-seconds", type=float, default=180.0, help="time given to settle (default 180)")
    p.add_argument("--parallel", type=int, default=3, help="HTTP calls made at once (default 3)")
    p.add_argument("--out", type=Path, default=Path("chaos/out"), help="where run folders go")
    args = p.parse_args(argv)
    if (
        args.sagas < 2
        or args.gap <= 0
        or args.step_seconds < 0
        or args.settle_seconds <= 0
        or args.parallel < 1
    ):
        return (
            "--sagas must be at least 2, --gap, --settle-seconds and --parallel positive, "
            "--step-seconds not negative"
        )
    return UpgradeOptions(
        ref=args.ref,
        sagas=args.sagas,
        gap=args.gap,
        step_seconds=args.step_seconds,
        settle_seconds=args.settle_seconds,
        parallel=args.parallel,
        out=args.out,
        command=f"python -m chaos upgrade {shlex.join(argv)}",
    )


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["upgrade"]:
        chosen = upgrade_options(given[1:])
        if isinstance(chosen, str):
            print(f"chaos upgrade: {chosen}", file=sys.stderr)
            return 2
        return upgrade(chosen)
    opts = options(given)
    if isinstance(opts, str):
        print(f"chaos: {opts}", file=sys.stderr)
        return 2
    return run(opts)


def _stop_on_term(signum: int, _frame: object) -> None:
    """SIGTERM ends the run the way an error would: its `finally` stops the cluster it
    started (PostgreSQL, Redis, the processes) instead of leaving them running."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop_on_term)
    raise SystemExit(main())

"""What a chaos run starts: the README's topology on default pools and default settings, with
the processes' server URLs taken from the run's route. Nothing is started here."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos import defaults, report
from chaos.__main__ import main, options
from chaos.cluster import QUEUES, topology
from chaos.links import Proxied
from chaos.routes import Direct, Endpoints
from chaos.run import Options, Run
from orchestrator.core.config import Settings

# What a deployment must set; every other setting keeps the orchestrator's default.
DEPLOYMENT = {
    "PRESSROOM_DATABASE_URL",
    "PRESSROOM_BROKER_URL",
    "PRESSROOM_SECRET",
    "PRESSROOM_INDEX_DIR",
    "PRESSROOM_WEBHOOK_ALLOW",
}


def test_processes_run_on_the_default_settings(tmp_path: Path) -> None:
    env = Run(Options(out=tmp_path)).env(Endpoints("postgresql+psycopg://db", "redis://broker"))
    assert {k for k in env if k.startswith("PRESSROOM_")} == DEPLOYMENT
    assert {k: v for k, v in env.items() if k.startswith("OTEL_")} == {
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
    }
    assert (env["PRESSROOM_DATABASE_URL"], env["PRESSROOM_BROKER_URL"]) == (
        "postgresql+psycopg://db",
        "redis://broker",
    ), "the processes take the URLs the route hands them"


def test_the_suite_times_itself_by_the_defaults() -> None:
    fields = Settings.model_fields
    assert defaults.DESTINATION_TIMEOUT == fields["destination_timeout"].default
    assert defaults.STALL_SECONDS > fields["destination_timeout"].default, "a hang outlasts the caller"
    assert defaults.SETTLE_SECONDS == 4 * fields["lease_seconds"].default, "settling allows leases to run out"
    assert Options().settle_seconds == defaults.SETTLE_SECONDS


def test_workers_run_on_their_default_pools() -> None:
    procs = dict(topology(8000))
    assert set(procs) == {"relay", "serve", *(f"worker-{q}" for q in QUEUES)}
    assert all("--pool" not in args and "--concurrency" not in args for args in procs.values())
    assert procs["worker-publisher"][:3] == ("worker", "--queues", "publisher")


def test_the_direct_route_hands_the_servers_own_urls() -> None:
    direct = Endpoints("postgresql+psycopg://127.0.0.1:1/postgres", "redis://127.0.0.1:2/0")
    assert Direct().start(direct) == direct


def test_the_processes_go_through_the_proxies_unless_told_direct() -> None:
    default, direct = options(["--seed", "4"]), options(["--direct"])
    assert isinstance(default, Options) and isinstance(direct, Options)
    assert isinstance(default.route, Proxied) and default.route.seed == 4
    assert isinstance(Options().route, Proxied)
    assert isinstance(direct.route, Direct)


@pytest.mark.parametrize(
    "argv",
    [
        ["--sagas", "0"],
        ["--sagas", "20", "--calm-sagas", "20"],
        ["--calm-sagas", "-1"],
        ["--recovery-margin", "-1"],
        ["--settle-seconds", "0"],
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("chaos: ") and err.count("\n") == 1


def test_an_option_argparse_refuses_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--sagas", "many"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("chaos: argument --sagas") and err.count("\n") == 1


def test_options_as_the_docs_give_them() -> None:
    opts = options(["--sagas", "30", "--docs", "none"])
    assert isinstance(opts, Options)
    assert opts.docs is None and opts.calm_sagas == 3, "a tenth of the sagas run before any fault"
    assert opts.command == "make chaos CHAOS_ARGS='--sagas 30 --docs none'"
    default = options([])
    assert isinstance(default, Options) and default.docs == Path("docs/reliability.md")
    assert default.recovery_margin == 10.0 and default.calm_sagas == 6


def test_the_reliability_page_opens_with_what_the_run_writes_there() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
    assert page.read_text(encoding="utf-8").startswith(report.PREFACE)


def test_a_soak_spreads_about_a_thousand_sagas_an_hour_over_its_whole_window() -> None:
    opts = options(["--soak-minutes", "60", "--docs", "none"])
    assert isinstance(opts, Options)
    assert opts.soak and opts.fault_seconds == 3600 and opts.sagas == 1000
    assert opts.fault_gap == 15.0 and opts.sample_seconds == 60.0
    given = options(["--soak-minutes", "10", "--sagas", "50", "--sample-seconds", "20"])
    assert isinstance(given, Options) and given.sagas == 50 and given.sample_seconds == 20
    plain = options([])
    assert isinstance(plain, Options) and not plain.soak and plain.fault_gap == 4.5


@pytest.mark.parametrize("argv", [["--soak-minutes", "0"], ["--soak-minutes", "5", "--sample-seconds", "0"]])
def test_a_bad_soak_option_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("chaos: --soak-minutes") and err.count("\n") == 1

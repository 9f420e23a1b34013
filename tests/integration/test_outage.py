"""PostgreSQL stopped under `pressroom submit`: exit 5 in one line, never a
traceback; once it is back, the same `--request-id` gives one saga."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PRESSROOM, Cli, base_env, free_port
from tests.support.pg_server import pg_bin, pg_server


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    if pg_bin("initdb") is None or pg_bin("pg_ctl") is None:
        pytest.fail("initdb/pg_ctl not found under /usr/lib/postgresql/*/bin")
    with pg_server(tmp_path, free_port()) as srv:
        yield srv


def submit_args(corpus: Path, site: Path, request_id: str) -> list[str]:
    return [
        "submit",
        "--brief",
        "history of the library network",
        "--corpus",
        str(corpus),
        "--dest",
        f"site:{site}",
        "--as",
        "dana",
        "--request-id",
        request_id,
        "--json",
    ]


def assert_one_line_exit_5(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 5, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "database is unreachable" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def sagas_of(cli: Cli) -> list[str]:
    return [s["saga_id"] for s in cli.json("status")["sagas"]]


def test_stopped_database_exits_5_and_the_retry_makes_one_saga(server, corpus: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(
        base_env(
            PRESSROOM_DATABASE_URL=server.url, PRESSROOM_BROKER_URL="inline://", PRESSROOM_CONNECT_RETRY="1"
        ),
        tmp_path,
    )
    assert sagas_of(cli) == []
    server.stop()
    down = cli.run(*submit_args(corpus, tmp_path / "site", "req-1"))
    assert_one_line_exit_5(down)
    assert_one_line_exit_5(cli.run("status", "--json"))
    server.start()
    first = cli.json(*submit_args(corpus, tmp_path / "site", "req-1")[:-1])
    again = cli.json(*submit_args(corpus, tmp_path / "site", "req-1")[:-1])
    assert first["saga_id"] == again["saga_id"] and again["replayed"] is True
    assert sagas_of(cli) == [first["saga_id"]]


def test_database_stopped_while_submit_runs(server, corpus: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = base_env(
        PRESSROOM_DATABASE_URL=server.url, PRESSROOM_BROKER_URL="inline://", PRESSROOM_CONNECT_RETRY="1"
    )
    cli = Cli(env, tmp_path)
    assert sagas_of(cli) == []
    running = subprocess.Popen(
        [PRESSROOM, *submit_args(corpus, tmp_path / "site", "req-2")],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Stop the server as soon as the saga row exists, i.e. while the submit is at work.
    import psycopg

    plain = server.url.replace("postgresql+psycopg", "postgresql")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and running.poll() is None:
        try:
            with psycopg.connect(plain, connect_timeout=2) as conn:
                if conn.execute("select count(*) from sagas").fetchone() != (0,):
                    break
        except psycopg.Error:
            pass
        time.sleep(0.05)
    server.stop()
    out, err = running.communicate(timeout=120)
    done = subprocess.CompletedProcess(running.args, running.returncode, out, err)
    if done.returncode != 0:
        assert_one_line_exit_5(done)
    server.start()
    retried = cli.json(*submit_args(corpus, tmp_path / "site", "req-2")[:-1])
    assert sagas_of(cli) == [retried["saga_id"]], "the same request id made a second saga"


def test_a_record_logged_as_the_process_exits_follows_the_commands_rule(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sent-marks still queued are written at exit, after `main` returned: a warning then
    (the database gone) is dropped after an exit 5 and printed once after any other exit."""
    import logging

    from orchestrator.entrypoints.cli import main

    root = logging.getLogger()
    try:
        monkeypatch.setenv("PRESSROOM_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:1/gone")
        monkeypatch.setenv("PRESSROOM_CONNECT_RETRY", "0")
        assert main(["status", "no-such-saga"]) == 5
        logging.getLogger("outbox.writer").warning("could not mark 1 outbox rows sent, left for the relay")
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and "database is unreachable" in lines[0], lines

        assert main(["--version"]) == 0
        logging.getLogger("outbox.writer").warning("could not mark 1 outbox rows sent, left for the relay")
        assert capsys.readouterr().err.splitlines() == [
            "warning: could not mark 1 outbox rows sent, left for the relay"
        ]
    finally:  # the command's handler stays for the process's exit: not past this test
        for handler in [h for h in root.handlers if type(h).__name__ == "_CommandLog"]:
            root.removeHandler(handler)

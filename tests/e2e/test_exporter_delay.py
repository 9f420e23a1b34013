"""A collector that is down or never answers does not hold a command up, and says so once.

The command is `pressroom submit` (its trace starts there, so it has spans to export)
through the console script, timed from spawn to exit beside the same command with
`OTEL_TRACES_EXPORTER=none` in the same test. With OTLP pointed at a closed local
port, or at a socket that accepts connections and never reads them, it ends within
3 s of that and writes at most one line about the export on stderr. A receiver that
answers (`bench/_otlp_receiver.py`) gets the command's spans, and nothing is written.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PRESSROOM, ROOT, SAMPLE_CORPUS, base_env, free_port

SLACK = 3.0  # seconds a command may take over the same command without export


def _submit(env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    args = [
        PRESSROOM, "submit", "--brief", "the library network", "--corpus", str(SAMPLE_CORPUS),
        "--dest", f"site:{cwd / 'site'}", "--as", "dana", "--json",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["saga_id"]
    return elapsed, done


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A socket that listens (the kernel completes connections) and never reads or answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield int(listener.getsockname()[1])


def _closed_port() -> int:
    port = free_port()  # bound and released: nothing listens there now
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    return port


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_unreachable_collector_costs_a_command_little_and_one_line(
    tmp_path: Path, silent_port: int, protocol: str
) -> None:
    env = base_env(PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'p.db'}", PRESSROOM_BROKER_URL="inline://")
    _submit(env, tmp_path)  # the database made and migrated: the timed runs only submit
    closed = _closed_port()
    otlp = {
        port: {
            **env,
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        }
        for port in (closed, silent_port)
    }
    # Interleaved, twice, each compared by its faster run: the shared machine's busy moments
    # only ever add time.
    times: dict[int | None, list[float]] = {None: [], closed: [], silent_port: []}
    for _ in range(2):
        elapsed, quiet = _submit(env, tmp_path)
        times[None].append(elapsed)
        assert quiet.stderr == ""  # no export asked for: nothing said about one
        for port, port_env in otlp.items():
            elapsed, done = _submit(port_env, tmp_path)
            times[port].append(elapsed)
            lines = done.stderr.splitlines()
            assert all(line.startswith("warning: traces not exported to http://127.0.0.1:") for line in lines)
            # Refused at once, the export fails and says so once; a silent peer may be left
            # behind before it fails, and then nothing is said.
            assert len(lines) == 1 if port == closed else len(lines) <= 1, done.stderr
    baseline = min(times[None])
    for port in (closed, silent_port):
        fastest = min(times[port])
        assert fastest < baseline + SLACK, (
            f"{protocol} to port {port}: {fastest:.1f}s, {baseline:.1f}s without"
        )


def test_an_answering_collector_gets_the_spans_and_nothing_is_written(tmp_path: Path) -> None:
    receiver = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "_otlp_receiver.py")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        env = base_env(
            PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'p.db'}",
            PRESSROOM_BROKER_URL="inline://",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        )
        _, done = _submit(env, tmp_path)
        assert done.stderr == ""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as answer:
            stats = json.loads(answer.read())
        assert stats["spans"] > 0  # the timed command above does export: the bound is not vacuous
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)

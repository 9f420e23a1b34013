"""Start Pressroom's own processes (relay, workers, a throwaway redis-server)
for tests, and always stop them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

PRESSROOM = str(Path(sys.executable).parent / "pressroom")


class Proc:
    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._fh = self.log.open("ab")
        self.popen = subprocess.Popen(
            args, env=env, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True
        )

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=15)
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=15)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        self._fh.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Processes:
    """Owns every process a test starts; `stop_all` runs at teardown."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: list[Proc] = []

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        proc = Proc(name, list(args), env or self.env, self.log_dir)
        self.procs.append(proc)
        return proc

    def worker(self, name: str = "worker", queues: str = "researcher,writer,reviewer,publisher") -> Proc:
        # Role workers run solo (one process, simple to kill); a publisher-only worker runs its
        # shipped default, a threads pool.
        pool = [] if queues == "publisher" else ["--pool", "solo"]
        return self.start(name, PRESSROOM, "worker", "--queues", queues, *pool, "--loglevel", "INFO")

    def relay(self, name: str = "relay") -> Proc:
        return self.start(name, PRESSROOM, "relay")

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.output()[-3000:]}" for p in self.procs)


def wait_until(
    check: Callable[[], Any], *, timeout: float = 60, every: float = 0.2, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def cli_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([PRESSROOM, *args, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"pressroom {' '.join(args)}: exit {done.returncode}: {done.stderr}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


SAMPLE_BRIEF = "history of the library network"


def submit(
    env: dict[str, str], corpus: Path, *destinations: str, brief: str = SAMPLE_BRIEF, actor: str | None = None
) -> str:
    """`pressroom submit` of `brief` on `corpus` to `destinations` (as `actor`); the saga's id."""
    args = ["submit", "--brief", brief, "--corpus", str(corpus)]
    for uri in destinations:
        args += ["--dest", uri]
    if actor is not None:
        args += ["--as", actor]
    return str(cli_json(env, *args)["saga_id"])


_STATE = text("SELECT state FROM sagas WHERE id = :saga_id")
_READERS: dict[str, Engine] = {}


def saga_state(env: dict[str, str], saga_id: str) -> str:
    """The saga's stored state, read from its database directly. A wait polls this every
    0.2 s, and a `pressroom status` process each time would take a core of this machine
    from the processes under test (`pressroom status` has tests of its own). Each read
    opens its own connection, so a test that restarts the server is read across it."""
    url = env["PRESSROOM_DATABASE_URL"]
    engine = _READERS.get(url) or _READERS.setdefault(url, create_engine(url, poolclass=NullPool))
    with engine.connect() as conn:
        state = conn.execute(_STATE, {"saga_id": saga_id}).scalar()
    assert state is not None, f"no saga {saga_id} in {url}"
    return str(state)


@contextlib.contextmanager
def redis_server(port: int, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A throwaway redis-server on its own port, keeping nothing on disk."""
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        wait_until(lambda: _ping(redis, port), timeout=15, what=f"redis on {port}")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _ping(redis: Any, port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_connect_timeout=0.5).ping())
    except Exception:
        return False

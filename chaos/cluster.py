"""The servers and processes of one chaos run, and a supervisor for them.

PostgreSQL is a private cluster (tests/support/pg_server.py: initdb + pg_ctl on
a free port); Redis a `redis-server` on a free port. The Pressroom processes
are the README's native topology: one `pressroom relay`, one
`pressroom worker --queues Q` per queue, each on its default pool (threads:
4 for a role queue, 16 for the publisher), and `pressroom serve`. The
supervisor plays systemd's `Restart=always`: a process that exits is started
again, and every exit the nemesis did not cause is recorded with its status.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.pg_server import PgServer

PRESSROOM = str(Path(sys.executable).parent / "pressroom")
QUEUES = ("researcher", "writer", "reviewer", "publisher")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def topology(api_port: int) -> list[tuple[str, tuple[str, ...]]]:
    """(name, `pressroom` arguments) of each process: the README's topology, default pools."""
    return [
        ("relay", ("relay",)),
        *((f"worker-{q}", ("worker", "--queues", q, "--loglevel", "INFO")) for q in QUEUES),
        ("serve", ("serve", "--port", str(api_port))),
    ]


class Redis:
    """A redis-server of the run's own; `kill()` is kill -9, `start()` brings it back."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port = port
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, persistent: bool = False) -> str:
        """Start it; `persistent` alternates the two profiles: AOF on (everysec) or nothing on disk."""
        aof = ["--appendonly", "yes", "--appendfsync", "everysec"] if persistent else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                *aof,
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.starts += 1
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.ping():
                return "aof" if persistent else "none"
            time.sleep(0.1)
        raise RuntimeError(f"redis-server on {self.port} did not start")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except Exception:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def client_pause(self, ms: int) -> None:
        import redis

        redis.Redis(port=self.port, socket_connect_timeout=1).execute_command("CLIENT", "PAUSE", ms)  # type: ignore[no-untyped-call]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            if self.proc.poll() is None:
                self.proc.kill()


class Postgres:
    def __init__(self, root: Path, port: int) -> None:
        self.server = PgServer(root, port)

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> None:
        self.server.init()
        self.server.start()

    def restart_immediate(self) -> float:
        """pg_ctl stop -m immediate, then start; returns the seconds it was down."""
        began = time.monotonic()
        self.server.stop("immediate")
        self.server.start()
        return time.monotonic() - began

    def stop(self) -> None:
        self.server.cleanup()


@dataclass
class Managed:
    name: str
    args: list[str]
    popen: subprocess.Popen[bytes] | None = None
    held_until: float = 0.0  # the nemesis keeps it down until then
    expected_exit: bool = False
    starts: int = 0
    exits: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] | None = None  # its own environment, else the supervisor's


class Supervisor:
    """Starts the Pressroom processes and restarts any that exits."""

    def __init__(self, env: dict[str, str], log_dir: Path, *, cwd: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.cwd = cwd
        self.procs: dict[str, Managed] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="supervisor")

    def add(
        self,
        name: str,
        *args: str,
        launcher: tuple[str, ...] = (PRESSROOM,),
        env: dict[str, str] | None = None,
    ) -> None:
        """Start `launcher args` (by default the `pressroom` script), in `env` when given."""
        self.procs[name] = Managed(name, [*launcher, *args], env=env)
        self._spawn(self.procs[name])

    def start(self) -> None:
        """Begin restarting what exits."""
        self._thread.start()

    def topology(self, api_port: int) -> None:
        for name, args in topology(api_port):
            self.add(name, *args)
        self.start()

    def _spawn(self, m: Managed) -> None:
        log = (self.log_dir / f"{m.name}.log").open("ab")
        log.write(f"\n=== start {m.starts + 1} at {time.strftime('%H:%M:%S')} ===\n".encode())
        log.flush()
        m.popen = subprocess.Popen(
            m.args,
            env=m.env or self.env,
            cwd=self.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        m.starts += 1
        m.expected_exit = False

    def _loop(self) -> None:
        while not self._stop.wait(0.3):
            now = time.monotonic()
            with self._lock:
                for m in self.procs.values():
                    if m.popen is None or m.popen.poll() is None:
                        continue
                    if not m.expected_exit:
                        m.exits.append({"at": time.time(), "status": m.popen.returncode, "by": "itself"})
                        m.expected_exit = True
                    if now >= m.held_until:
                        self._spawn(m)

    # -- the nemesis's handles ---------------------------------------------
    def kill(self, name: str, *, hold: float) -> int | None:
        """SIGKILL a process's group; it stays down `hold` seconds."""
        with self._lock:
            m = self.procs[name]
            if m.popen is None or m.popen.poll() is not None:
                return None
            m.expected_exit = True
            m.held_until = max(m.held_until, time.monotonic() + hold)  # a replace in progress keeps it
            pid = m.popen.pid
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            m.exits.append({"at": time.time(), "status": "SIGKILL", "by": "nemesis"})
            return pid

    def signal(self, name: str, sig: int) -> bool:
        m = self.procs[name]
        if m.popen is None or m.popen.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(m.popen.pid, sig)
            return True
        return False

    def replace(
        self,
        name: str,
        args: list[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        grace: float = 60.0,
    ) -> dict[str, Any]:
        """`systemctl restart`: SIGTERM to the process group (systemd's KillMode=control-group),
        SIGKILL after `grace` seconds, then start it again (with `args` and in `env` when given;
        `env` None: the supervisor's), unless the supervisor is stopping."""
        with self._lock:
            m = self.procs[name]
            m.expected_exit = True
            m.held_until = math.inf
        began = time.monotonic()
        status: int | str | None = None
        if m.popen is not None and m.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(m.popen.pid, signal.SIGTERM)
                os.killpg(m.popen.pid, signal.SIGCONT)
            try:
                status = m.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(m.popen.pid, signal.SIGKILL)
                m.popen.wait(timeout=10)
                status = "SIGKILL after grace"
        stopped = time.monotonic() - began
        with self._lock:
            m.exits.append({"at": time.time(), "status": status, "by": "replace"})
            m.args, m.env, m.held_until = args or m.args, env, 0.0
            if not self._stop.is_set():
                self._spawn(m)
        return {"process": name, "exit": status, "stop_seconds": round(stopped, 2)}

    def log_of(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def pids(self) -> dict[str, int | None]:
        """Each process's PID, None while it is down."""
        with self._lock:
            return {
                name: m.popen.pid if m.popen is not None and m.popen.poll() is None else None
                for name, m in self.procs.items()
            }

    def unexpected_exits(self) -> list[dict[str, Any]]:
        return [{"process": m.name, **e} for m in self.procs.values() for e in m.exits if e["by"] == "itself"]

    def all_up(self) -> bool:
        return all(m.popen is not None and m.popen.poll() is None for m in self.procs.values())

    def release_holds(self) -> None:
        with self._lock:
            for m in self.procs.values():
                if m.held_until != math.inf:  # a replace in progress starts it itself
                    m.held_until = 0.0

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for m in self.procs.values():
            if m.popen is not None and m.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(m.popen.pid, signal.SIGCONT)
                    os.killpg(m.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for m in self.procs.values():
            if m.popen is None:
                continue
            with contextlib.suppress(subprocess.TimeoutExpired):
                m.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            if m.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(m.popen.pid, signal.SIGKILL)
                m.popen.wait(timeout=10)

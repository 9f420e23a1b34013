"""A PostgreSQL server of a test's own (initdb + pg_ctl on a free port), to stop
and start under a running command without touching the shared server.

PostgreSQL refuses to run as root; as root the server runs as the `postgres`
system user, in a directory of its own under the system temp folder (the
test's tmp_path is not reachable by another user).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class PgServer:
    def __init__(self, root: Path, port: int) -> None:
        self.port = port
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            root = Path(tempfile.mkdtemp(prefix="pressroom-pg-"))
            pw = pwd.getpwnam("postgres")
            os.chown(root, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=timeout)

    def init(self) -> None:
        initdb = pg_bin("initdb")
        assert initdb, "initdb not found"
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        pg_ctl = pg_bin("pg_ctl")
        assert pg_ctl
        opts = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off"
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "start")

    def stop(self, mode: str = "immediate") -> None:
        pg_ctl = pg_bin("pg_ctl")
        assert pg_ctl
        self._run(pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop")

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        if self.as_user:
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def pg_server(tmp_path: Path, port: int) -> Iterator[PgServer]:
    server = PgServer(tmp_path, port)
    server.init()
    server.start()
    try:
        yield server
    finally:
        server.cleanup()

"""Which pool serves which queue, and the publisher's own worker process.

The publisher's work waits on destinations (a webhook may take seconds), so
it never shares a worker with the role queues: by default it runs in its own
worker process on a threads pool, where a slow destination holds one thread
while the others publish. The role queues' work is mostly CPU but about a
fifth of it waits on PostgreSQL, so it runs on a threads pool too (4 by
default): one thread's round trip is another thread's turn on the CPU
(measured in docs/benchmarks.md: 9.8 sagas/s solo, 10.7 with 2 threads, 11.7
with 4, 11.9 with 8 on 2 cores). `--pool prefork` runs tasks in child
processes instead. No I/O except `PublisherChild`, which starts and stops that
process for `pressroom worker` run without `--queues`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading

from orchestrator.core.routing import QUEUES

log = logging.getLogger(__name__)

PUBLISHER = "publisher"
ROLE_QUEUES = tuple(q for q in QUEUES if q != PUBLISHER)
# Threads, not processes: a publish is mostly waiting on a destination.
PUBLISHER_POOL = "threads"
# Each thread holds at most one publish in flight; the process's database pool
# (`db_pool_size`: 2 connections per thread) is shared by its threads. Twice the
# default `PRESSROOM_DESTINATION_CONCURRENCY`: one slow destination may take at
# most half of the threads, and the other half stay free for the other destinations.
PUBLISHER_CONCURRENCY = 16
ROLE_POOL = "threads"
ROLE_CONCURRENCY = 4
# What one thread of a threads pool holds at once: its message's unit of work and a tool
# call's pinned connection (its own short reads come and go). Fewer, and the pool's
# overflow connections are opened and closed on every busy moment (a server backend
# each); more, and a deployment's processes could together pass PostgreSQL's
# `max_connections` (100 by default).
CONNECTIONS_PER_THREAD = 2
# Deliveries waiting on a model that one worker process holds at once (`outbox.waits`): they
# hold no thread and no connection while they wait; a profile's `concurrency` bounds its calls.
WAITING_DELIVERIES = 256
# How long a stopping `pressroom worker` waits for its publisher process to finish what it holds.
CHILD_STOP_SECONDS = 60.0


def default_pool(queues: list[str]) -> str:
    return PUBLISHER_POOL if queues == [PUBLISHER] else ROLE_POOL


def default_concurrency(queues: list[str], pool: str) -> int:
    if queues == [PUBLISHER] and pool == PUBLISHER_POOL:
        return PUBLISHER_CONCURRENCY
    return ROLE_CONCURRENCY if pool == ROLE_POOL else 1


def db_pool_size(pool: str, concurrency: int, configured: int, *, explicit: bool) -> int:
    """The database connections a worker process keeps open: `PRESSROOM_DB_POOL_SIZE` when
    set; else, for a threads pool, enough for every thread at once."""
    if explicit or pool != "threads":
        return configured
    return max(configured, CONNECTIONS_PER_THREAD * concurrency)


def destination_limit(pool: str, concurrency: int, configured: int, *, explicit: bool) -> int:
    """The publish calls one destination may have in flight from this worker process:
    `PRESSROOM_DESTINATION_CONCURRENCY` when set; else, on a threads pool, its default but
    never more than half the threads, so a slow destination leaves the other half to the
    others however small the pool."""
    if explicit or pool != "threads":
        return configured
    return min(configured, max(1, concurrency // 2))


def waiting_loops(pool: str, concurrency: int) -> int:
    """The event loops that run a worker process's deliveries waiting on a model: as many as
    its threads on a threads pool (each runs one delivery's code at a time), else one."""
    return concurrency if pool == "threads" else 1


def shares_publisher(queues: list[str]) -> bool:
    """True when the publisher queue would share a worker with a role queue."""
    return PUBLISHER in queues and len(queues) > 1


class PublisherChild:
    """`pressroom worker --queues publisher` as a child of the role queues' worker.

    Started before the role worker runs and stopped (SIGTERM, then waited for)
    after it returns. If the child exits non-zero while the parent runs, the
    parent is asked to stop (SIGTERM to itself) and exits non-zero too, so a
    supervisor restarts both together.
    """

    def __init__(self, loglevel: str, concurrency: int | None) -> None:
        entry = "from orchestrator.entrypoints.cli import run; run()"
        args = [sys.executable, "-c", entry, "worker", "--queues", PUBLISHER]
        args += ["--loglevel", loglevel]
        if concurrency is not None:
            args += ["--concurrency", str(concurrency)]
        self.args = args
        self.failed = False
        self._stopping = threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args)
        threading.Thread(target=self._watch, name="publisher-child", daemon=True).start()

    def _watch(self) -> None:
        assert self.proc is not None
        code = self.proc.wait()
        if not self._stopping.is_set():
            log.error("the publisher worker (pid %d) exited with status %d; stopping", self.proc.pid, code)
            self.failed = True  # whatever its status: the publisher queue has no worker now
            with contextlib.suppress(ProcessLookupError):
                os.kill(os.getpid(), signal.SIGTERM)

    def stop(self) -> int:
        """Stop the child; its exit status (non-zero also when it had died on its own)."""
        self._stopping.set()
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=CHILD_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = int(self.proc.returncode or 0)
        return 1 if self.failed and code == 0 else code


__all__ = [
    "CONNECTIONS_PER_THREAD",
    "PUBLISHER",
    "PUBLISHER_CONCURRENCY",
    "PUBLISHER_POOL",
    "ROLE_CONCURRENCY",
    "ROLE_POOL",
    "ROLE_QUEUES",
    "WAITING_DELIVERIES",
    "PublisherChild",
    "db_pool_size",
    "default_concurrency",
    "destination_limit",
    "default_pool",
    "shares_publisher",
    "waiting_loops",
]

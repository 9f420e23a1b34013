"""A TCP proxy for one link, and the faults a network makes on it.

Owns the bytes between the processes under test and one server (PostgreSQL,
Redis): `LinkProxy(host, port)` listens on a free loopback port and forwards
each connection to that target, on an asyncio loop in a thread of its own. Its
controls may be called from any thread (tests, the nemesis); each is in
effect when it returns.

- `partition(seconds)`: a blackhole, not a kill. Connections open stay open
  and go silent both ways (no FIN, no RST); new ones are accepted and not
  forwarded (the proxy connects to the target only when the link heals).
  Bytes, a close or a reset sent meanwhile are held and delivered in order
  once it heals, as TCP's retransmission would deliver them (a peer that gave
  up meanwhile has closed its end, and refuses them).
- `latency(ms, jitter_ms)`: each chunk is delivered `ms` ± `jitter_ms` later,
  both ways, never reordered, until cleared (`latency(0)` or `heal()`).
- `cut_midway()`: on each connection open now, the next chunk the server
  sends is forwarded in part (half of it), then both sides are reset.
- `half_open()`: each connection open now is forgotten, as by a server that
  failed over or a NAT or firewall that lost its state: nothing crosses it
  again, either way, and the client is never told (no FIN, no RST; what it
  sends is swallowed); the server's side is closed. New connections are
  forwarded as usual. A partition that heals ends; this silence does not.
- `heal()` ends a partition, the latency and a cut not yet made (not a
  half-open connection); `stop()` resets every connection and stops.

What it cannot show: the kernel under the proxy answers both peers' TCP
(ACKs, keepalive probes), so a fault here is one the applications see, never
one their kernels' keepalives or `TCP_USER_TIMEOUT` detect.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import random
import socket
import struct
import termios
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

T = TypeVar("T")
CHUNK = 65536
HELD_CHUNKS = 256  # per direction: then the proxy stops reading, and the sender's kernel buffers fill
# Bytes a reset may still leave unsent after a partial response is written; waited for, at most this long.
FLUSH_SECONDS = 0.5


class _End:
    """What a reader met instead of bytes: the peer's close (EOF) or its reset."""

    def __init__(self, reset: bool) -> None:
        self.reset = reset


@dataclass(frozen=True)
class LinkStats:
    """Counters since the proxy started (the report's figures)."""

    connections: int  # accepted, in all
    open: int  # open now
    bytes_up: int  # client → server, delivered
    bytes_down: int  # server → client, delivered
    partitions: int
    cuts: int  # connections reset by `cut_midway`
    forgotten: int  # connections left half-open by `half_open`


@dataclass(eq=False)
class _Pipe:
    """One client connection and its connection to the target."""

    client: asyncio.StreamWriter
    reader: asyncio.StreamReader
    upstream: asyncio.StreamWriter | None = None
    owner: asyncio.Task[None] | None = None
    cut_pending: bool = False
    forgotten: bool = False
    closed: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close with RST (SO_LINGER 0), not FIN."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _unsent(writer: asyncio.StreamWriter) -> int:
    """Bytes still in the transport's buffer or the kernel's send queue (Linux: TIOCOUTQ)."""
    pending = writer.transport.get_write_buffer_size()
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
            pending += int(struct.unpack("i", raw)[0])
    return pending


class LinkProxy:
    """A proxy of one link: `start()`, point clients at `port` (or `through(url)`), inject faults."""

    def __init__(self, target_host: str, target_port: int, *, name: str = "link", seed: int = 0) -> None:
        self.target = (target_host, target_port)
        self.name = name
        self._random = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._heal_timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self._latency = (0.0, 0.0)
        self._pipes: set[_Pipe] = set()
        self._counts = dict.fromkeys(
            ("connections", "bytes_up", "bytes_down", "partitions", "cuts", "forgotten"), 0
        )
        self.port = 0

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> LinkProxy:
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(started,), name=f"proxy-{self.name}", daemon=True
        )
        self._thread.start()
        self.port = started.result(timeout=10)
        return self

    def _run(self, started: concurrent.futures.Future[int]) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            self._flowing = asyncio.Event()
            self._flowing.set()
            self._server = loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
            started.set_result(int(self._server.sockets[0].getsockname()[1]))
        except BaseException as exc:
            started.set_exception(exc)
            loop.close()
            return
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self) -> None:
        """Reset every connection, stop listening, end the thread."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            return
        with contextlib.suppress(concurrent.futures.TimeoutError):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _shutdown(self) -> None:
        assert self._flowing is not None
        if self._server is not None:
            self._server.close()
        self._stopping = True
        self._flowing.set()  # connections held by a partition go on, to their end
        owners = [pipe.owner for pipe in self._pipes if pipe.owner is not None]
        for pipe in list(self._pipes):
            self._teardown(pipe)
        await asyncio.gather(*owners, return_exceptions=True)

    def __enter__(self) -> LinkProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def through(self, url: str) -> str:
        """`url` with its host and port replaced by this proxy's (user, password, path kept)."""
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@" if userinfo else ""
        return urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{self.port}"))

    # -- controls (any thread) -----------------------------------------------------------

    def partition(self, seconds: float | None = None) -> None:
        """Silence the link both ways, for `seconds` (None: until `heal()`)."""
        self._call(lambda: self._partition(seconds))

    def latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        """Delay every chunk `ms` ± `jitter_ms` milliseconds, both ways; `latency(0)` clears it."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError("latency and jitter are milliseconds, at least 0")
        self._call(lambda: setattr(self, "_latency", (ms / 1000.0, jitter_ms / 1000.0)))

    def cut_midway(self) -> None:
        """Cut each open connection in the middle of the next chunk the server sends."""

        def arm() -> None:
            for pipe in self._pipes:
                pipe.cut_pending = True

        self._call(arm)

    def half_open(self) -> None:
        """Forget every connection open now: silent for good, for its client; closed, for the server."""

        def forget() -> None:
            for pipe in self._pipes:
                if not pipe.forgotten:
                    pipe.forgotten = True
                    self._counts["forgotten"] += 1
                    for task in pipe.tasks:
                        task.cancel()
                    if pipe.upstream is not None:
                        pipe.upstream.close()

        self._call(forget)

    def heal(self) -> None:
        """End the partition, the latency and any cut not yet made (a half-open connection stays so)."""

        def heal() -> None:
            self._end_partition()
            self._latency = (0.0, 0.0)
            for pipe in self._pipes:
                pipe.cut_pending = False

        self._call(heal)

    def stats(self) -> LinkStats:
        return self._call(lambda: LinkStats(open=len(self._pipes), **self._counts))

    def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the proxy's loop and return its result."""
        if self._loop is None:
            raise RuntimeError(f"proxy {self.name} is not started")
        if threading.current_thread() is self._thread:
            return fn()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout=10)

    # -- faults (loop thread) ---------------------------------------------------------

    def _partition(self, seconds: float | None) -> None:
        assert self._flowing is not None and self._loop is not None
        if self._heal_timer is not None:
            self._heal_timer.cancel()
            self._heal_timer = None
        if self._flowing.is_set():
            self._counts["partitions"] += 1
        self._flowing.clear()
        if seconds is not None:
            self._heal_timer = self._loop.call_later(seconds, self._end_partition)

    def _end_partition(self) -> None:
        assert self._flowing is not None
        if self._heal_timer is not None:
            self._heal_timer.cancel()
            self._heal_timer = None
        self._flowing.set()

    def _delay(self) -> float:
        base, jitter = self._latency
        if not base and not jitter:
            return 0.0
        return max(0.0, base + self._random.uniform(-jitter, jitter))

    # -- forwarding (loop thread) -------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        pipe = _Pipe(client=writer, reader=reader, owner=asyncio.current_task())
        self._pipes.add(pipe)
        self._counts["connections"] += 1
        try:
            await self._flowing.wait()  # partitioned: accepted, not forwarded
            if self._stopping:
                return
            if pipe.forgotten:
                await self._swallow(pipe)
                return
            try:
                up_reader, pipe.upstream = await asyncio.open_connection(*self.target)
            except OSError:
                _reset(writer)
                return
            if pipe.closed:
                _reset(pipe.upstream)
                return
            up: asyncio.Queue[tuple[float, bytes | _End]] = asyncio.Queue(HELD_CHUNKS)
            down: asyncio.Queue[tuple[float, bytes | _End]] = asyncio.Queue(HELD_CHUNKS)
            pipe.tasks = [
                asyncio.create_task(self._read(reader, up)),
                asyncio.create_task(self._write(pipe, up, pipe.upstream, "bytes_up")),
                asyncio.create_task(self._read(up_reader, down)),
                asyncio.create_task(self._write(pipe, down, writer, "bytes_down")),
            ]
            await asyncio.gather(*pipe.tasks, return_exceptions=True)
            if pipe.forgotten:
                await self._swallow(pipe)
            self._teardown(pipe, reset=False)  # both ways ended with a close, or already torn down
        finally:
            self._teardown(pipe)

    async def _swallow(self, pipe: _Pipe) -> None:
        """A half-open connection: read what the client sends, deliver nothing, until it closes."""
        with contextlib.suppress(ConnectionError, OSError):
            while await pipe.reader.read(CHUNK):
                pass

    async def _read(
        self, reader: asyncio.StreamReader, queue: asyncio.Queue[tuple[float, bytes | _End]]
    ) -> None:
        """Read one direction; each chunk gets the time it is due, never before the one ahead."""
        assert self._loop is not None
        last_due = 0.0
        while True:
            try:
                data: bytes | _End = await reader.read(CHUNK) or _End(reset=False)
            except (ConnectionError, OSError):
                data = _End(reset=True)
            last_due = max(last_due, self._loop.time() + self._delay())
            await queue.put((last_due, data))
            if isinstance(data, _End):
                return

    async def _write(
        self,
        pipe: _Pipe,
        queue: asyncio.Queue[tuple[float, bytes | _End]],
        writer: asyncio.StreamWriter,
        counter: str,
    ) -> None:
        """Deliver one direction's chunks when due and the link flows; a cut, an end or a
        peer that gave up tears the whole connection down."""
        assert self._flowing is not None and self._loop is not None
        while True:
            due, data = await queue.get()
            while True:
                await self._flowing.wait()
                wait = due - self._loop.time()
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            # Flowing and due: nothing below awaits before the write.
            if isinstance(data, _End):
                if data.reset or writer.transport.is_closing() or not writer.can_write_eof():
                    self._teardown(pipe, reset=True)
                    return
                writer.write_eof()
                return
            if pipe.cut_pending and counter == "bytes_down":
                await self._cut(pipe, data)
                return
            if writer.transport.is_closing():  # the peer gave up while the data was held
                self._teardown(pipe, reset=True)
                return
            writer.write(data)
            self._counts[counter] += len(data)
            try:
                await writer.drain()
            except (ConnectionError, OSError):
                self._teardown(pipe, reset=True)
                return

    async def _cut(self, pipe: _Pipe, data: bytes) -> None:
        assert self._loop is not None
        part = data[: len(data) // 2]
        if part and not pipe.client.transport.is_closing():
            pipe.client.write(part)
            self._counts["bytes_down"] += len(part)
            deadline = self._loop.time() + FLUSH_SECONDS
            while _unsent(pipe.client) and self._loop.time() < deadline:
                await asyncio.sleep(0.005)
        self._counts["cuts"] += 1
        self._teardown(pipe, reset=True)

    def _teardown(self, pipe: _Pipe, *, reset: bool = True) -> None:
        if pipe.closed:
            return
        pipe.closed = True
        self._pipes.discard(pipe)
        for writer in (pipe.client, pipe.upstream):
            if reset:
                _reset(writer)
            elif writer is not None:
                writer.close()
        current = asyncio.current_task()
        for task in pipe.tasks:
            if task is not current:
                task.cancel()


__all__ = ["LinkProxy", "LinkStats"]

"""`chaos.proxy.LinkProxy` against a tiny echo server on real loopback sockets: it forwards,
and its partition, latency and cut do what `chaos/proxy.py` says."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from chaos.proxy import LinkProxy

BIG = 400_000  # bytes the server answers `big` with: many chunks, so a cut lands midway


class _Echo(socketserver.BaseRequestHandler):
    """Echoes what it reads; `big` is answered with BIG bytes; `close` is answered, after
    0.2 s, by a close (FIN)."""

    server: _EchoServer

    def handle(self) -> None:
        self.server.accepted.append(time.monotonic())
        sock: socket.socket = self.request
        try:
            while data := sock.recv(65536):
                if data.startswith(b"big"):
                    sock.sendall(b"x" * BIG)
                elif data.startswith(b"close"):
                    time.sleep(0.2)
                    return
                else:
                    sock.sendall(data)
        except ConnectionResetError:
            self.server.resets += 1
        finally:
            self.server.ends += 1


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.accepted: list[float] = []
        self.resets = 0
        self.ends = 0  # connections whose handler returned (the client closed or reset)


@pytest.fixture
def echo() -> Iterator[_EchoServer]:
    server = _EchoServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo: _EchoServer) -> Iterator[LinkProxy]:
    with LinkProxy("127.0.0.1", echo.server_address[1], name="echo", seed=1) as link:
        yield link


def _client(proxy: LinkProxy, timeout: float = 2.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def _silent(sock: socket.socket, seconds: float) -> bool:
    """Nothing arrives for `seconds`: no bytes, no FIN (recv would return b""), no RST."""
    sock.settimeout(seconds)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(5)
    return False


def test_it_forwards_both_ways_and_counts(proxy: LinkProxy, echo: _EchoServer) -> None:
    with _client(proxy) as sock:
        sock.sendall(b"hello")
        assert _recv_exactly(sock, 5) == b"hello"
        stats = proxy.stats()
    assert (stats.connections, stats.bytes_up, stats.bytes_down) == (1, 5, 5)
    assert len(echo.accepted) == 1


def test_a_partition_silences_open_and_new_connections_then_delivers_what_was_held(
    proxy: LinkProxy, echo: _EchoServer
) -> None:
    with _client(proxy) as old:
        old.sendall(b"a")
        assert _recv_exactly(old, 1) == b"a"
        proxy.partition(2.0)
        old.sendall(b"held")
        new = _client(proxy)  # accepted, not forwarded
        new.sendall(b"late")
        assert _silent(old, 0.6)
        assert _silent(new, 0.1)
        assert len(echo.accepted) == 1, "the proxy connected to the target during the partition"
        # It heals on its own: what was sent meanwhile arrives, on both connections.
        assert _recv_exactly(old, 4) == b"held"
        assert _recv_exactly(new, 4) == b"late"
        assert len(echo.accepted) == 2
        new.close()
    assert proxy.stats().partitions == 1


def test_a_close_during_a_partition_reaches_the_client_only_when_it_heals(proxy: LinkProxy) -> None:
    with _client(proxy) as sock:
        sock.sendall(b"close")
        time.sleep(0.05)  # the request is through; the server closes 0.2 s later
        proxy.partition()
        assert _silent(sock, 0.8), "the server's FIN crossed the partition"
        proxy.heal()
        sock.settimeout(5)
        assert sock.recv(1) == b""


def test_latency_with_jitter_delays_both_ways_and_keeps_the_order(proxy: LinkProxy) -> None:
    with _client(proxy) as sock:
        proxy.latency(150, 0)
        began = time.monotonic()
        sock.sendall(b"x")
        assert _recv_exactly(sock, 1) == b"x"
        assert time.monotonic() - began >= 0.3, "each way is 150 ms late"

        proxy.latency(20, 15)
        sent = b"".join(b"%03d" % i for i in range(40))
        for i in range(40):
            sock.sendall(b"%03d" % i)
            time.sleep(0.002)
        assert _recv_exactly(sock, len(sent)) == sent

        proxy.latency(0)
        began = time.monotonic()
        sock.sendall(b"y")
        assert _recv_exactly(sock, 1) == b"y"
        assert time.monotonic() - began < 0.2


def test_a_cut_forwards_part_of_the_next_response_then_resets_both_sides(
    proxy: LinkProxy, echo: _EchoServer
) -> None:
    with _client(proxy) as cut, _client(proxy) as spared:
        cut.sendall(b"a")
        assert _recv_exactly(cut, 1) == b"a"
        proxy.cut_midway()
        cut.sendall(b"big")
        got = 0
        with pytest.raises(ConnectionResetError):
            while chunk := cut.recv(65536):
                got += len(chunk)
        assert 0 < got < BIG, f"{got} of {BIG} bytes arrived before the reset"
        # A connection opened after the cut is not cut.
        with _client(proxy) as later:
            later.sendall(b"big")
            assert len(_recv_exactly(later, BIG)) == BIG
        # The other connection open at the time is cut on its next response too.
        spared.sendall(b"hi")
        partial = b""
        with pytest.raises(ConnectionResetError):
            while chunk := spared.recv(10):
                partial += chunk
        assert partial in (b"", b"h")
    assert proxy.stats().cuts == 2
    deadline = time.monotonic() + 5
    while echo.resets < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert echo.resets >= 1, "the server side was not reset"


def test_half_open_leaves_open_connections_silent_for_good_and_forwards_new_ones(
    proxy: LinkProxy, echo: _EchoServer
) -> None:
    with _client(proxy) as old:
        old.sendall(b"a")
        assert _recv_exactly(old, 1) == b"a"
        proxy.half_open()
        proxy.heal()  # does not bring it back
        old.sendall(b"lost")
        assert _silent(old, 0.6), "a half-open connection answered, closed or reset"
        assert echo.ends == 1, "the server's side was not closed"
        with _client(proxy) as new:
            new.sendall(b"b")
            assert _recv_exactly(new, 1) == b"b"
        assert _silent(old, 0.1)
    assert proxy.stats().forgotten == 1


def test_heal_ends_every_fault(proxy: LinkProxy) -> None:
    with _client(proxy) as sock:
        proxy.latency(500)
        proxy.cut_midway()
        proxy.partition()
        proxy.heal()
        began = time.monotonic()
        sock.sendall(b"z")
        assert _recv_exactly(sock, 1) == b"z"
        assert time.monotonic() - began < 0.5


def test_stop_resets_connections_and_stops_listening(echo: _EchoServer) -> None:
    link = LinkProxy("127.0.0.1", echo.server_address[1]).start()
    sock = _client(link)
    sock.sendall(b"q")
    assert _recv_exactly(sock, 1) == b"q"
    link.stop()
    with pytest.raises(ConnectionResetError):
        sock.recv(1)
    sock.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", link.port), timeout=2).close()


def test_a_target_that_refuses_is_a_reset_for_the_client() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with LinkProxy("127.0.0.1", port) as link:
        # The reset can reach the client before its own connect() returns (a loaded machine
        # schedules the proxy first), or at its first send or read: a reset all the same.
        with pytest.raises(ConnectionResetError), _client(link) as sock:
            sock.sendall(b"x")
            sock.recv(1)


def test_through_points_a_url_at_the_proxy(proxy: LinkProxy) -> None:
    assert proxy.through("postgresql+psycopg://postgres:pw@db.example:5432/test") == (
        f"postgresql+psycopg://postgres:pw@127.0.0.1:{proxy.port}/test"
    )
    assert proxy.through("redis://127.0.0.1:6379/7") == f"redis://127.0.0.1:{proxy.port}/7"

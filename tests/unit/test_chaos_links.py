"""The proxied route and the link fault kinds, injected by a real nemesis into real proxies in
front of a loopback echo server (no PostgreSQL or Redis: the kinds act on the links only)."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from chaos.cluster import Postgres, Redis, Supervisor
from chaos.destinations import Destinations
from chaos.faults import REGISTRY, Fault
from chaos.links import POSTGRESQL, REDIS, Proxied
from chaos.nemesis import Handles, Nemesis
from chaos.routes import Endpoints


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(ConnectionError):
            while data := self.request.recv(65536):
                self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def route(echo: int) -> Iterator[Proxied]:
    proxied = Proxied(seed=3)
    proxied.start(Endpoints(f"postgresql+psycopg://u:p@127.0.0.1:{echo}/db", f"redis://127.0.0.1:{echo}/0"))
    yield proxied
    proxied.stop()


@pytest.fixture
def made() -> Iterator[list[Nemesis]]:
    """The nemeses a test made: halted at its end, so no timer of theirs outlives the proxies."""
    nemeses: list[Nemesis] = []
    yield nemeses
    for n in nemeses:
        n.halt()


def _nemesis(route: Proxied, made: list[Nemesis], tmp_path: Path, *faults: Fault) -> Nemesis:
    handles = Handles(
        Supervisor({}, tmp_path, cwd=tmp_path),
        cast(Redis, None),
        cast(Postgres, None),  # not touched by a link kind
        cast(Destinations, None),
        lambda _line: None,
        extra={"route": route, "links": route},
    )
    made.append(Nemesis(list(faults), handles))
    return made[-1]


def _round_trip(port: int, data: bytes = b"ping", timeout: float = 5.0) -> tuple[bytes, float]:
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    return got, time.monotonic() - began


def _done(n: Nemesis, count: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(n.done) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(n.done) == count, n.done


def test_the_route_hands_the_processes_the_proxies_urls(echo: int) -> None:
    proxied = Proxied()
    urls = proxied.start(
        Endpoints(f"postgresql+psycopg://u:p@127.0.0.1:{echo}/db", f"redis://127.0.0.1:{echo}/0")
    )
    try:
        pg, rd = proxied.proxies[POSTGRESQL], proxied.proxies[REDIS]
        assert urls == Endpoints(
            f"postgresql+psycopg://u:p@127.0.0.1:{pg.port}/db", f"redis://127.0.0.1:{rd.port}/0"
        )
        assert pg.target == rd.target == ("127.0.0.1", echo) and len({pg.port, rd.port, echo}) == 3
        assert _round_trip(pg.port)[0] == b"ping" and _round_trip(rd.port)[0] == b"ping"
    finally:
        proxied.stop()


def test_a_partition_holds_the_link_silent_for_its_hold(
    route: Proxied, made: list[Nemesis], tmp_path: Path
) -> None:
    n = _nemesis(route, made, tmp_path, Fault(0.0, "partition-redis", "redis", 0.8))
    n.start()
    _done(n, 1)
    got, took = _round_trip(route.proxies[REDIS].port)
    assert got == b"ping" and took >= 0.5, "held until the partition healed"
    assert route.proxies[REDIS].stats().partitions == 1 and route.proxies[POSTGRESQL].stats().partitions == 0
    assert n.done[0]["link"] == "redis" and n.counts["partition-redis"] == 1
    assert _round_trip(route.proxies[POSTGRESQL].port)[1] < 0.5, "the other link flows"


def test_latency_slows_one_link_for_its_hold_then_clears(
    route: Proxied, made: list[Nemesis], tmp_path: Path
) -> None:
    slow = Fault(0.0, "link-latency", "postgresql", 1.5, (("latency_ms", 150), ("jitter_ms", 0)))
    n = _nemesis(route, made, tmp_path, slow)
    n.start()
    _done(n, 1)
    port = route.proxies[POSTGRESQL].port
    assert _round_trip(port)[1] >= 0.29, "150 ms each way"
    time.sleep(1.6)
    assert _round_trip(port)[1] < 0.15, "cleared after the hold"


def test_a_cut_forwards_half_a_response_then_resets_and_is_counted(
    route: Proxied, made: list[Nemesis], tmp_path: Path
) -> None:
    port = route.proxies[REDIS].port
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn.sendall(b"a")
    assert conn.recv(10) == b"a", "the connection is forwarded before the cut"
    n = _nemesis(route, made, tmp_path, Fault(0.0, "link-cut", "redis", 0.5))
    n.start()
    _done(n, 1)
    assert n.done[0]["armed"] == 1
    conn.sendall(b"x" * 1000)
    got = b""
    with pytest.raises(ConnectionResetError):
        while chunk := conn.recv(65536):
            got += chunk
    conn.close()
    assert got == b"x" * 500
    time.sleep(0.7)
    assert n.done[0]["cut"] == 1, "the cuts made within the hold, added to the fault's entry"


def test_a_half_open_redis_link_forgets_its_connections(
    route: Proxied, made: list[Nemesis], tmp_path: Path
) -> None:
    port = route.proxies[REDIS].port
    conn = socket.create_connection(("127.0.0.1", port), timeout=0.5)
    conn.sendall(b"a")
    assert conn.recv(10) == b"a"
    n = _nemesis(route, made, tmp_path, Fault(0.0, "half-open-redis", "redis", 31.0))
    n.start()
    _done(n, 1)
    assert n.done[0]["forgotten"] == 1
    conn.sendall(b"b")
    with pytest.raises(TimeoutError):
        conn.recv(10)
    conn.close()
    assert _round_trip(port)[0] == b"ping", "a new connection is forwarded"


def test_the_link_kinds_heal_heals_both_links(route: Proxied, made: list[Nemesis], tmp_path: Path) -> None:
    """What `Nemesis.stop` runs for these kinds (its other heals need the run's servers)."""
    n = _nemesis(
        route,
        made,
        tmp_path,
        Fault(0.0, "partition-postgres", "postgresql", 60.0),
        Fault(0.0, "link-latency", "redis", 60.0, (("latency_ms", 300), ("jitter_ms", 0))),
    )
    n.start()
    _done(n, 2)
    heals = {REGISTRY[k].heal for k in ("partition-postgres", "partition-redis", "link-latency", "link-cut")}
    assert len(heals) == 1
    heal = heals.pop()
    assert heal is not None
    heal(n)
    assert _round_trip(route.proxies[POSTGRESQL].port)[1] < 0.3
    assert _round_trip(route.proxies[REDIS].port)[1] < 0.3


def test_a_later_latency_fault_on_a_link_is_not_cleared_by_an_earlier_ones_end(
    route: Proxied, made: list[Nemesis], tmp_path: Path
) -> None:
    n = _nemesis(
        route,
        made,
        tmp_path,
        Fault(0.0, "link-latency", "redis", 0.3, (("latency_ms", 20), ("jitter_ms", 0))),
        Fault(0.1, "link-latency", "redis", 1.5, (("latency_ms", 150), ("jitter_ms", 0))),
    )
    n.start()
    _done(n, 2)
    time.sleep(0.5)
    assert _round_trip(route.proxies[REDIS].port)[1] >= 0.29, "the second still holds"
    time.sleep(1.0)
    assert _round_trip(route.proxies[REDIS].port)[1] < 0.15, "until its own end"


def test_what_a_fault_finds_out_before_its_entry_is_written_is_kept(
    route: Proxied, made: list[Nemesis], tmp_path: Path
) -> None:
    fault = Fault(0.0, "partition-redis", "redis", 0.1)
    n = _nemesis(route, made, tmp_path, fault)
    n.amend(fault, seen=1)
    n.start()
    _done(n, 1)
    n.amend(fault, later=2)
    assert n.done[0]["seen"] == 1 and n.done[0]["later"] == 2 and n.done[0]["link"] == "redis"

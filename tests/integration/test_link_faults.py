"""Sagas across faulty links: the relay and the workers reach PostgreSQL and Redis only
through `chaos.proxy.LinkProxy`, which partitions a link, slows it, cuts it in the middle
of a response, or leaves its connections half-open, while sagas are being prepared and
published.

One topology for the module's saga cases (starting the processes costs more than a
case): the shared PostgreSQL server (a database of the module's own) and the shared Redis
(this test process's database, `tests.conftest.redis_db_number`), one proxy for each, and
the shipped processes with both URLs pointed at their proxy: `pressroom relay`,
`pressroom worker --queues researcher,writer,reviewer` and `pressroom worker --queues
publisher` (their default threads pools). The test submits and approves in its own process
on the direct URLs, so the fault it injects never holds the test up.

Each saga case submits a saga and waits for its review, submits a second, approves the
first and injects its fault at once (one saga publishing, one being prepared), heals,
approves what reaches review, and checks: every saga succeeds, each site receipt is
written once and never undone, no process exits, and the time from the heal to the last
success is within `RECOVERY_BOUND`.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
import redis

from chaos.proxy import LinkProxy
from chaos.site_watch import SiteWatch
from orchestrator import people
from orchestrator.celery_app import make_celery
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import make_engine
from outbox.broker import BrokerUnavailable, CeleryBroker
from outbox.messages import Envelope
from tests.conftest import PRESSROOM, SAMPLE_CORPUS, base_env, redis_db_number
from tests.support.in_process import app_for
from tests.support.processes import Processes, saga_state, wait_until

LEASE_SECONDS = 5.0
LINK_TIMEOUT = 2.0  # PRESSROOM_LINK_TIMEOUT of every process here
RELAY_POLL = 0.2
PARTITION_SECONDS = 3.0  # longer than LINK_TIMEOUT: the clients give up on the link meanwhile
# From the heal to the last success: work a fault broke is sent again when its lease runs
# out; a silent Redis connection is given up within LINK_TIMEOUT (a command) or 1 s + 2 x
# LINK_TIMEOUT (a consumer's BRPOP); then the sagas' own remaining work (a preparation,
# two publishes), given 10 s on this shared machine.
RECOVERY_BOUND = LEASE_SECONDS + 1 + 3 * LINK_TIMEOUT + 10


@dataclass
class Links:
    pg: LinkProxy
    redis: LinkProxy
    procs: Processes
    app: Pressroom
    env: dict[str, str]
    site: Path
    watch: SiteWatch
    sagas: list[str]  # every saga the module's cases submitted


def _proxy_to(url: str, default_port: int, name: str) -> LinkProxy:
    parts = urlsplit(url)
    return LinkProxy(parts.hostname or "127.0.0.1", parts.port or default_port, name=name).start()


@pytest.fixture(scope="module")
def links(
    pg_admin_url: str, redis_base_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Links]:
    tmp = tmp_path_factory.mktemp("links")
    name = f"pressroom_t_{uuid.uuid4().hex[:12]}"
    plain = pg_admin_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    pg_url = f"{pg_admin_url.rsplit('/', 1)[0]}/{name}"
    redis_url = f"{redis_base_url.rsplit('/', 1)[0]}/{redis_db_number()}"
    redis.Redis.from_url(redis_url).flushdb()
    pg = _proxy_to(pg_url, 5432, "postgresql")
    rd = _proxy_to(redis_url, 6379, "redis")
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=redis_url,
        PRESSROOM_LEASE_SECONDS=str(LEASE_SECONDS),
        PRESSROOM_LINK_TIMEOUT=str(LINK_TIMEOUT),
        PRESSROOM_RELAY_POLL=str(RELAY_POLL),
        PRESSROOM_RELAY_GRACE="0.5",
    )
    proxied = {
        **env,
        "PRESSROOM_DATABASE_URL": pg.through(pg_url),
        "PRESSROOM_BROKER_URL": rd.through(redis_url),
    }
    watch = SiteWatch(tmp / "site", tmp / "site-journal.jsonl")
    watch.start()
    procs = Processes(proxied, tmp)
    try:
        with app_for(env, tmp) as app:  # the schema is made here, before the processes start
            procs.relay()
            for queues in ("researcher,writer,reviewer", "publisher"):
                procs.start(f"worker-{queues}", PRESSROOM, "worker", "--queues", queues, "--loglevel", "INFO")
            for proc in procs.procs[1:]:
                wait_until(lambda p=proc: " ready." in p.output(), timeout=90, what=proc.name)
            yield Links(pg, rd, procs, app, env, tmp / "site", watch, [])
    finally:
        procs.stop_all()
        watch.stop()
        pg.stop()
        rd.stop()
        from orchestrator.store import db as store_db

        store_db.dispose_all()
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _submit(links: Links) -> str:
    dana = people.resolve(links.app.people, token=None, claimed="dana")
    out = links.app.submissions.submit(
        brief="history of the library network",
        corpus=str(SAMPLE_CORPUS),
        destinations=[f"site:{links.site}"],
        actor=dana,
    )
    return str(out["saga_id"])


def _approve(links: Links, saga_id: str) -> None:
    erin = people.resolve(links.app.people, token=None, claimed="erin")
    links.app.reviews.approve(saga_id, version=1, actor=erin)


def _exited(procs: Processes) -> dict[str, int]:
    return {p.name: code for p in procs.procs if (code := p.popen.poll()) is not None}


def _through(links: Links, fault: Callable[[], None]) -> float:
    """Two sagas through `fault` (injected, and healed, when it returns); the seconds from
    the heal to the last success."""
    env = links.env
    first = _submit(links)
    wait_until(lambda: saga_state(env, first) == "ready-for-review", timeout=60, what="the first review")
    second = _submit(links)
    links.sagas += [first, second]
    _approve(links, first)
    fault()
    healed = time.monotonic()
    approved = {first}

    def all_succeeded() -> bool:
        assert not _exited(links.procs), f"processes exited: {_exited(links.procs)}"
        states = {sid: saga_state(env, sid) for sid in (first, second)}
        assert not set(states.values()) & {"failed", "effect-unknown", "cancelled"}, states
        for sid, state in states.items():
            if state == "ready-for-review" and sid not in approved:
                _approve(links, sid)
                approved.add(sid)
        return all(state == "succeeded" for state in states.values())

    try:
        wait_until(all_succeeded, timeout=RECOVERY_BOUND + 30, what="both sagas to succeed")
    except AssertionError:
        print(links.procs.logs())
        raise
    took = time.monotonic() - healed
    links.watch.look()
    keys = [e["key"] for e in links.watch.events if e["kind"] == "apply"]
    assert len(keys) == len(set(keys)), f"a receipt was written twice: {keys}"
    assert len(keys) == len(links.sagas), f"{len(links.sagas)} sagas, receipts {keys}"
    assert not [e for e in links.watch.events if e["kind"] == "undo"], links.watch.events
    print(f"{took:.1f} s from the heal to the last success; {links.pg.stats()}; {links.redis.stats()}")
    return took


def _partition(link: LinkProxy) -> Callable[[], None]:
    def fault() -> None:
        link.partition(PARTITION_SECONDS)
        time.sleep(PARTITION_SECONDS)  # it heals itself

    return fault


def test_a_postgresql_partition(links: Links) -> None:
    assert _through(links, _partition(links.pg)) <= RECOVERY_BOUND


def test_a_redis_partition(links: Links) -> None:
    assert _through(links, _partition(links.redis)) <= RECOVERY_BOUND


def test_latency_with_jitter_on_both_links(links: Links) -> None:
    def slow() -> None:
        links.pg.latency(20, 15)
        links.redis.latency(20, 15)
        time.sleep(3)
        links.pg.heal()
        links.redis.heal()

    assert _through(links, slow) <= RECOVERY_BOUND


def test_a_cut_in_the_middle_of_a_response_on_each_link(links: Links) -> None:
    def cut() -> None:
        links.pg.cut_midway()
        links.redis.cut_midway()

    assert _through(links, cut) <= RECOVERY_BOUND
    assert links.pg.stats().cuts and links.redis.stats().cuts


def test_redis_connections_left_half_open(links: Links) -> None:
    """The silence that never ends (a failover, a lost NAT entry): each process gives its
    Redis connections up after PRESSROOM_LINK_TIMEOUT and makes new ones."""
    assert _through(links, links.redis.half_open) <= RECOVERY_BOUND
    assert links.redis.stats().forgotten


# -- the settings behind those cases, each alone ----------------------------------------


def test_a_send_on_a_half_open_redis_connection_fails_within_the_link_timeout(redis_base_url: str) -> None:
    # The module's Redis database, not flushed (its processes may still be running), and a
    # queue none of them reads.
    redis_url = f"{redis_base_url.rsplit('/', 1)[0]}/{redis_db_number()}"
    queue = f"probe-{uuid.uuid4().hex[:8]}"
    with _proxy_to(redis_url, 6379, "redis") as link:
        broker = CeleryBroker(make_celery(link.through(redis_url), link_timeout=1.0), "redis")
        envelope = Envelope(message_id="m1", task="pressroom.probe", queue=queue, payload={})
        broker.send(envelope)  # the connection is made
        link.half_open()
        with ThreadPoolExecutor(1) as pool:
            try:
                refused = pool.submit(broker.send, envelope).exception(timeout=3)
            except TimeoutError:
                link.stop()  # resets the connection the send still waits on
                pytest.fail("the send still waited on the silent connection after 3 s")
        assert isinstance(refused, BrokerUnavailable) and "imeout" in str(refused), refused
        broker.send(envelope)  # on a new connection
    direct = redis.Redis.from_url(redis_url)
    assert direct.llen(queue) == 2
    direct.delete(queue)


def test_a_command_against_a_partitioned_database_exits_5_within_the_link_timeout(
    pg_url: str, tmp_path: Path
) -> None:
    with _proxy_to(pg_url, 5432, "postgresql") as link:
        link.partition()
        env = base_env(
            PRESSROOM_DATABASE_URL=link.through(pg_url),
            PRESSROOM_BROKER_URL="inline://",
            PRESSROOM_LINK_TIMEOUT="2",
            PRESSROOM_CONNECT_RETRY="0",
        )
        args = [
            "submit",
            "--brief",
            "b",
            "--corpus",
            str(SAMPLE_CORPUS),
            "--dest",
            f"site:{tmp_path}",
            "--as",
            "d",
        ]
        try:
            done = subprocess.run([PRESSROOM, *args], env=env, capture_output=True, text=True, timeout=25)
        except subprocess.TimeoutExpired:
            pytest.fail("the command still waited on the silent database after 25 s")
    assert done.returncode == 5, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "database is unreachable" in lines[0], done.stderr


def test_postgresql_connections_carry_keepalives_and_a_user_timeout(pg_url: str) -> None:
    """What the proxy cannot show (its kernel answers for the server): an idle connection
    whose server is gone is probed and dropped, and data the server never acknowledges
    breaks the connection, both after PRESSROOM_LINK_TIMEOUT. Settings in the URL win."""

    def options(url: str) -> tuple[int, ...]:
        engine = make_engine(url, link_timeout=4.5, upgrade=False)
        raw = engine.raw_connection()
        try:
            fd = raw.driver_connection.fileno()  # type: ignore[union-attr]
            with socket.socket(fileno=os.dup(fd)) as sock:
                return tuple(
                    sock.getsockopt(level, name)
                    for level, name in (
                        (socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                        (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                        (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                        (socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                        (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
                    )
                )
        finally:
            raw.close()
            engine.dispose()

    assert options(pg_url) == (1, math.ceil(4.5), 2, 3, 4500)
    assert options(f"{pg_url}?keepalives_idle=9")[1] == 9

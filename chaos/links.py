"""The proxied route of a chaos run, and the fault kinds of its links.

`Proxied` is the run's default `Route` (chaos/routes.py): one `LinkProxy`
(chaos/proxy.py) in front of the run's PostgreSQL and one in front of its
Redis, so every process (the relay, the workers, `pressroom serve`, the
operator's CLI) reaches them through a link the nemesis can break, while the
suite observes the servers directly. `python -m chaos --direct` runs without
it, and so without these kinds.

The link kinds (registered on import, after the nemesis's built-ins; each
needs the nemesis's `links` handle):

- `partition-postgres`, `partition-redis`: the link goes silent both ways
  for `hold` seconds (2–20: shorter and longer than the default
  `PRESSROOM_LINK_TIMEOUT`), then flows again; nothing is closed.
- `link-latency`: one link (seeded) delays every chunk both ways by
  `latency_ms` ± `jitter_ms` (seeded: 20–200 ms, jitter up to half of it)
  for `hold` seconds.
- `link-cut`: each connection open on one link (seeded) is cut in the middle
  of the next response its server sends (half of it forwarded, then both
  sides reset). The fault's entry gives the connections open (`armed`) and
  those cut within `hold` (`cut`); an idle one keeps its cut armed until it
  is used or the faults stop.
- `half-open-redis`: every Redis connection open now is forgotten: silent for
  good to its client, closed to the server (`forgotten`: how many). Its hold
  is how long a client may take to give such a connection up, 1 s + 2 × the
  default link timeout: the window its figures count.

When the faults stop, both links heal (a partition, latency, cuts not yet
made); a forgotten connection stays forgotten until its client gives it up.
"""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import urlsplit

from chaos.faults import Draw, Execute, Fault, FaultKind, Option, no_options, register
from chaos.nemesis import Nemesis
from chaos.proxy import LinkProxy, LinkStats
from chaos.routes import Endpoints
from orchestrator.core.config import Settings

POSTGRESQL, REDIS = "postgresql", "redis"
LINK_TIMEOUT = float(Settings.model_fields["link_timeout"].default)
HALF_OPEN_HOLD = 1.0 + 2 * LINK_TIMEOUT


class Proxied:
    """A route through one TCP proxy per server; `proxies` by link name once started."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.proxies: dict[str, LinkProxy] = {}

    def start(self, direct: Endpoints) -> Endpoints:
        for i, (name, url, port) in enumerate(
            ((POSTGRESQL, direct.database_url, 5432), (REDIS, direct.broker_url, 6379))
        ):
            parts = urlsplit(url)
            proxy = LinkProxy(
                parts.hostname or "127.0.0.1", parts.port or port, name=name, seed=self.seed + i
            )
            self.proxies[name] = proxy.start()
        return Endpoints(
            self.proxies[POSTGRESQL].through(direct.database_url),
            self.proxies[REDIS].through(direct.broker_url),
        )

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    def stats(self) -> dict[str, LinkStats]:
        return {name: proxy.stats() for name, proxy in self.proxies.items()}

    def stop(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()


def _proxy(n: Nemesis, f: Fault) -> LinkProxy:
    links = n.handles.extra["links"]
    if not isinstance(links, Proxied):
        raise TypeError("the nemesis's links handle is not a proxied route")
    return links.proxies[f.target or REDIS]


def _partition(n: Nemesis, f: Fault) -> dict[str, Any]:
    _proxy(n, f).partition(f.hold)
    return {"link": f.target}


def _latency_options(rng: random.Random, _before: list[Fault]) -> tuple[Option, ...]:
    ms = rng.randint(20, 200)
    return (("latency_ms", ms), ("jitter_ms", rng.randint(0, ms // 2)))


def _latency(n: Nemesis, f: Fault) -> None:
    """Slow the link for `hold`, unless a later latency fault of that link took it over."""
    proxy = _proxy(n, f)
    gens: dict[str, int] = n.state.setdefault("latency_gen", {})
    gen = gens[proxy.name] = gens.get(proxy.name, 0) + 1
    proxy.latency(float(f.option("latency_ms", 50)), float(f.option("jitter_ms", 0)))

    def clear() -> None:
        if gens[proxy.name] == gen:
            proxy.latency(0)

    n.later(f.hold, clear)


def _cut(n: Nemesis, f: Fault) -> dict[str, Any]:
    proxy = _proxy(n, f)
    before = proxy.stats()
    proxy.cut_midway()
    n.later(f.hold, lambda: n.amend(f, cut=proxy.stats().cuts - before.cuts))
    return {"armed": before.open}


def _half_open(n: Nemesis, f: Fault) -> dict[str, Any]:
    proxy = _proxy(n, f)
    before = proxy.stats().forgotten
    proxy.half_open()
    return {"forgotten": proxy.stats().forgotten - before}


def _heal_links(n: Nemesis) -> None:
    links = n.handles.extra.get("links")
    if isinstance(links, Proxied):
        links.heal()


def _of_links(
    name: str,
    weight: float,
    hold: tuple[float, float],
    execute: Execute,
    targets: tuple[str, ...],
    draw: Draw = no_options,
) -> FaultKind:
    return FaultKind(name, weight, hold, execute, targets, draw=draw, heal=_heal_links, requires=("links",))


for _kind in (
    _of_links("partition-postgres", 1, (2.0, 20.0), _partition, (POSTGRESQL,)),
    _of_links("partition-redis", 1, (2.0, 20.0), _partition, (REDIS,)),
    _of_links("link-latency", 1, (5.0, 20.0), _latency, (POSTGRESQL, REDIS), _latency_options),
    _of_links("link-cut", 1, (3.0, 10.0), _cut, (POSTGRESQL, REDIS)),
    _of_links("half-open-redis", 0.5, (HALF_OPEN_HOLD, HALF_OPEN_HOLD), _half_open, (REDIS,)),
):
    register(_kind)

__all__ = ["HALF_OPEN_HOLD", "POSTGRESQL", "REDIS", "Proxied"]

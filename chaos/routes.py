"""Which PostgreSQL and Redis URLs the run's processes use, apart from the ones the suite observes with.

The suite reads the database and pings Redis directly (`Endpoints` of the
servers it started). The relay, the workers, `pressroom serve` and the
operator's CLI commands take theirs from a `Route`: `Direct` hands them the
same URLs; a route through a TCP proxy (one listening port per server) hands
them the proxy's, so a link fault cuts the processes off while the suite
still sees what happened. A route is started after the servers and stopped
after the processes (also when the run ends before it was started).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Endpoints:
    database_url: str
    broker_url: str


class Route(Protocol):
    def start(self, direct: Endpoints) -> Endpoints:
        """The URLs the processes use to reach the servers at `direct`."""
        ...

    def stop(self) -> None: ...


class Direct:
    """No link in between: the processes use the servers' own URLs."""

    def start(self, direct: Endpoints) -> Endpoints:
        return direct

    def stop(self) -> None:
        pass


__all__ = ["Direct", "Endpoints", "Route"]

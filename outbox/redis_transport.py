"""kombu's Redis transport, with acknowledgements that survive a lost connection.

Owns one thing: what a Celery worker on `redis://` does with the messages it
holds (delivered, not yet acknowledged) when its connection to Redis is gone.

kombu keeps such a message in two places: the worker's `QoS._delivered`, and
Redis's `unacked` hash, from which `restore_visible` puts it back on its queue
once `visibility_timeout` has passed. When the connection drops, Celery's
consumer closes the kombu connection twice (`collect()`, then `close()`,
in `Consumer.on_connection_error_after_connected`). The first close detaches
the transport (`Transport.client = None`); the second closes the channel
again, whose `QoS.restore_unacked` then asks for a new Redis client, and
building it reads `Transport.client.hostname`: an `AttributeError` on `None`,
which is no connection error, so it escapes Celery's reconnect loop and the
worker stops ("Unrecoverable error"). A task that was running meanwhile ends
after the reconnect and acknowledges its message on that closed channel: the
same lookup fails again, in the worker's event loop, and stops the worker too.

Here a QoS whose channel has lost its transport restores and acknowledges
nothing, with a warning: there is no connection to send either on, and nothing is lost by
leaving them. If Redis kept its data, the messages are still in its
`unacked` hash and come back after the visibility timeout; if Redis lost it
(killed without persistence), they are gone with their queues. Either way
Pressroom's lease recovery sends the work again once its lease runs out, and
consumers apply a message once (inbox), so one restored twice is harmless.
With a live connection (a warm shutdown) everything is kombu's own.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu import connection as kombu_connection
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

log = logging.getLogger(__name__)

# Celery's `broker_transport` for a `redis://` broker URL (`orchestrator.celery_app`).
TRANSPORT = f"{__name__}:Transport"
# kombu writes a transport given by its path into the URLs it logs ("Connected to
# outbox.redis_transport:Transport://…"); as with its own pyamqp, it says `redis://` instead.
kombu_connection.resolve_aliases.setdefault(TRANSPORT, "redis")


class QoS(kombu_redis.QoS):
    """kombu's Redis QoS; on a channel cut off from Redis it forgets instead of failing."""

    def _detached(self) -> bool:
        transport = self.channel.connection
        return transport is None or transport.client is None

    def restore_unacked(self, client: Any = None) -> Any:
        if client is None and self._detached():
            held = len(self._delivered)
            log.warning(
                "broker connection lost: %d unacknowledged message(s) left to Redis's visibility "
                "timeout and Pressroom's lease recovery",
                held,
            )
            self._delivered.clear()
            return None
        return super().restore_unacked(client)  # type: ignore[no-untyped-call]

    def ack(self, delivery_tag: Any) -> None:
        if self._detached():
            log.warning("cannot acknowledge message %s: its broker connection was lost", delivery_tag)
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            return
        super().ack(delivery_tag)  # type: ignore[no-untyped-call]


class Channel(kombu_redis.Channel):
    QoS = QoS


class Transport(kombu_redis.Transport):
    Channel = Channel


__all__ = ["TRANSPORT", "Channel", "QoS", "Transport"]

"""The Redis transport's acknowledgements (`outbox.redis_transport`), in one
process on a real Redis.

Once Celery's consumer has collected the connection that delivered a message
(it does so when the connection is lost, then reconnects), an acknowledgement
on the old channel is dropped with a warning, and the message is left to kombu
(with Redis alive it is back in its queue already) and to the work's lease. On
a live connection an acknowledgement is kombu's own. That a late ack on a
channel cut off from a dead Redis no longer stops a worker is shown with real
processes in `test_broker_kill.py`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection, Exchange, Queue  # type: ignore[attr-defined]

from outbox.redis_transport import TRANSPORT


@pytest.fixture
def held(redis_url: str) -> Iterator[tuple[Connection, Queue, object]]:
    """A message taken from a fresh queue with the Pressroom transport, not acknowledged."""
    name = f"acks-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    conn = Connection(redis_url, transport=TRANSPORT)
    with conn.Producer() as producer:
        producer.publish({"n": 1}, exchange=queue.exchange, routing_key=name, declare=[queue])
    message = queue(conn.default_channel).get(no_ack=False)
    assert message is not None and message.payload == {"n": 1}
    try:
        yield conn, queue, message
    finally:
        conn.release()


def test_an_ack_after_the_connection_was_collected_is_dropped(
    held: tuple[Connection, Queue, object], redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    conn, queue, message = held
    conn.collect()  # what Celery's consumer does when the connection is lost
    with caplog.at_level(logging.WARNING, logger="outbox.redis_transport"):
        message.ack()  # type: ignore[attr-defined]
    assert "cannot acknowledge message" in caplog.text
    # Redis was alive, so kombu restored the unacknowledged message to its queue on close.
    assert redis.Redis.from_url(redis_url).llen(queue.name) == 1


def test_an_ack_on_a_live_connection_is_kombus_own(
    held: tuple[Connection, Queue, object], redis_url: str
) -> None:
    conn, queue, message = held
    message.ack()  # type: ignore[attr-defined]
    conn.release()  # nothing is left to restore
    client = redis.Redis.from_url(redis_url)
    assert client.llen(queue.name) == 0
    assert client.hlen("unacked") == 0

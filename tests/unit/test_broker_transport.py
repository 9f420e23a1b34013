"""Which kombu transport the Celery app asks for, by broker URL."""

from __future__ import annotations

from orchestrator.celery_app import broker_transport, make_celery
from outbox.redis_transport import TRANSPORT


def test_only_redis_urls_get_the_pressroom_transport() -> None:
    assert broker_transport("redis://127.0.0.1:6379/0") == TRANSPORT
    assert broker_transport("REDIS://host/1") == TRANSPORT
    assert broker_transport("rediss://host/1") is None  # kombu's own, with its TLS defaults
    assert broker_transport("amqp://guest@host//") is None
    assert broker_transport("inline://") is None


def test_the_celery_app_connects_with_it_and_names_the_url_as_given() -> None:
    conn = make_celery("redis://:secret@127.0.0.1:6390/3").connection_for_read()
    assert type(conn.transport).__module__ == "outbox.redis_transport"
    # kombu logs "Connected to <this>": the scheme the operator wrote, the password masked.
    assert conn.as_uri() == "redis://:**@127.0.0.1:6390/3"
    assert make_celery("amqp://guest@127.0.0.1//").conf.broker_transport is None

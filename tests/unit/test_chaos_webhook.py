"""The chaos webhook's failing DELETEs, as Pressroom's real `webhook:` destination meets them
(a real HTTP server on loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.cluster import free_port
from chaos.webhook import ChaosWebhook
from orchestrator.core.errors import MaybeApplied, NotApplied
from sagas.destinations.base import PublishedVersion
from sagas.destinations.webhook import WebhookDestination
from sagas.destinations.webhook_urls import WebhookAllow


@pytest.fixture
def hook(tmp_path: Path) -> Iterator[ChaosWebhook]:
    server = ChaosWebhook(free_port(), tmp_path / "journal.jsonl", stall_seconds=1.0, name="hook-a")
    server.start()
    yield server
    server.stop()


def _published(hook: ChaosWebhook) -> WebhookDestination:
    dest = WebhookDestination(hook.url, timeout=5.0, allow=WebhookAllow.parse("127.0.0.1"))
    version = PublishedVersion(
        saga_id="s", version=1, version_digest="d", title="T", slug="t", markdown="# T\n", approver="erin"
    )
    dest.publish("key-1", version)
    return dest


@pytest.mark.parametrize(
    ("mode", "raised", "code"), [("error", MaybeApplied, 503), ("refuse", NotApplied, 409)]
)
def test_a_failing_delete_undoes_nothing_until_its_time_is_up(
    hook: ChaosWebhook, mode: str, raised: type[Exception], code: int
) -> None:
    dest = _published(hook)
    hook.fail_deletes(mode, 60)
    with pytest.raises(raised):
        dest.compensate("key-1", {})
    assert hook.is_applied("key-1") and hook.requests[f"DELETE answered {code}"] == 1
    assert dest.status("key-1").kind == "applied", "publishing and the status query still work"
    hook.delete_down_until = 0.0  # the fault's time is up
    dest.compensate("key-1", {})
    assert not hook.is_applied("key-1")
    assert [e["kind"] for e in hook.events] == ["apply", "undo"]


def test_an_unknown_delete_mode_is_refused(hook: ChaosWebhook) -> None:
    with pytest.raises(ValueError, match="unknown DELETE mode"):
        hook.fail_deletes("stall", 1)


def test_a_rejected_publish_is_a_definite_failure_for_the_armed_posts_only(hook: ChaosWebhook) -> None:
    dest = _published(hook)
    hook.status_down_until = float("inf")  # a 409 needs no status query to be definite
    hook.arm("reject", 1)
    version = PublishedVersion(
        saga_id="s2", version=1, version_digest="d2", title="U", slug="u", markdown="# U\n"
    )
    with pytest.raises(NotApplied):
        dest.publish("key-2", version)
    assert not hook.is_applied("key-2") and hook.mode == "normal"
    dest.publish("key-2", version)
    assert hook.is_applied("key-2")

"""The read settings of the quick CLI path: they answer only when `Settings()` would agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.light_config import postgres_conninfo, read_settings, sqlite_file, telemetry_asked

BASE = {"PRESSROOM_SECRET": "k", "PATH": "/bin"}


def test_defaults_and_the_three_values() -> None:
    got = read_settings(BASE)
    assert got is not None and got.sqlite_path == Path("pressroom.db") and got.token is None
    got = read_settings(
        {
            **BASE,
            "PRESSROOM_DATABASE_URL": "sqlite:////tmp/p.db",
            "pressroom_token": "pr_x",
            "PRESSROOM_REVIEW_REMINDER": "2h",
            "PRESSROOM_BROKER_URL": "redis://h/0",
        }
    )
    assert got is not None
    assert (got.sqlite_path, got.token, got.review_reminder) == (Path("/tmp/p.db"), "pr_x", 7200.0)
    assert read_settings({**BASE, "PRESSROOM_REVIEW_REMINDER": ""}) is not None


def test_anything_only_settings_can_judge_is_left_to_it() -> None:
    assert read_settings({**BASE, "PRESSROOM_MAX_ATTEMPTS": "5"}) is None
    assert read_settings({**BASE, "PRESSROOM_TOKEN": "a", "pressroom_token": "b"}) is None
    assert read_settings({**BASE, "PRESSROOM_REVIEW_REMINDER": "soon"}) is None
    assert read_settings({**BASE, "PRESSROOM_REVIEW_REMINDER": "0"}) is None
    assert read_settings({**BASE, "OTEL_TRACES_EXPORTER": "console"}) is None
    assert read_settings({"PRESSROOM_SECRET_FILE": "/nonexistent/secret"}) is None  # would be created
    for url in (
        "postgresql+psycopg://h/db?sslmode=require",
        "postgresql://h/db",
        "postgresql+psycopg://",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///p.db?mode=ro",
        "sqlite:///a%20b.db",
        "sqlite+pysqlite:///p.db",
        "mysql://x",
    ):
        assert read_settings({**BASE, "PRESSROOM_DATABASE_URL": url}) is None, url


def test_sqlite_file_and_telemetry() -> None:
    assert sqlite_file("sqlite:///rel/p.db") == Path("rel/p.db")
    assert sqlite_file("sqlite:////abs/p.db") == Path("/abs/p.db")
    assert not telemetry_asked({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": ""})
    assert telemetry_asked({"OTEL_METRICS_EXPORTER": "none,otlp"})
    assert telemetry_asked({"OTEL_SDK_DISABLED": "true"})


def test_a_plain_postgresql_url_is_read_as_libpq_conninfo() -> None:
    got = read_settings({**BASE, "PRESSROOM_DATABASE_URL": "postgresql+psycopg://u:p%40ss@h:5433/db"})
    assert got is not None and got.sqlite_path is None
    assert got.postgres == "postgresql://u:p%40ss@h:5433/db"
    assert postgres_conninfo("sqlite:///p.db") is None


def test_a_webhook_allow_list_is_accepted_only_as_settings_accepts_it() -> None:
    from orchestrator.core.config import Settings

    good, bad = "127.0.0.1, 10.0.0.0/8 hooks.internal [::1]", "http://x/"
    assert read_settings({**BASE, "PRESSROOM_WEBHOOK_ALLOW": good}) is not None
    assert Settings(webhook_allow=good).webhook_allow == good
    assert read_settings({**BASE, "PRESSROOM_WEBHOOK_ALLOW": bad}) is None
    with pytest.raises(ValueError, match="not a host name"):
        Settings(webhook_allow=bad)

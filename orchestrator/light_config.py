"""The few settings a read-only CLI command needs, read without pydantic.

`orchestrator.core.config.Settings` is the one definition of Pressroom's
settings; importing it costs pydantic-settings, several times the start
time of the whole CLI. `pressroom status` and `show` on a SQLite file or on
PostgreSQL need only the database URL, the caller's token and the review
reminder, so they read those here and everything else still goes through
`Settings`.

The rule that keeps the two readers from ever disagreeing: `read_settings`
answers only when it is sure `Settings()` would accept the same environment
and read the same three values; otherwise it returns None and the caller
builds `Settings()` as before (whose errors, exit 2, stay the only ones).
It answers None when

- a `PRESSROOM_*` variable is set that is not one of `ACCEPTED` (matched
  without regard to case, as pydantic-settings does), or one is set twice
  in different cases;
- the database is neither a plain SQLite file (`sqlite:///PATH`, no query,
  no `%`, not `:memory:`) nor a plain PostgreSQL URL
  (`postgresql+psycopg://…` with no query): everything else takes the full path;
- `PRESSROOM_REVIEW_REMINDER` does not parse as a duration, or
  `PRESSROOM_WEBHOOK_ALLOW` is not a list `Settings` accepts
  (`orchestrator.core.host_lists`, the one rule for both);
- telemetry is asked for (`telemetry_asked`): the full path sets up tracing.

`telemetry_asked` is the one test of the OTEL_* variables (also used by
`orchestrator.observability.start_tracing`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from orchestrator.core.host_lists import check_webhook_allow

PREFIX = "pressroom_"
SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIX = "postgresql+psycopg://"
# Settings fields whose every value Settings accepts, or that are checked here the way it checks them.
ACCEPTED = frozenset(
    {
        "database_url",
        "broker_url",
        "secret",
        "secret_file",
        "token",
        "review_reminder",
        "index_dir",
        "pipelines_dir",
        "trace_file",
        "webhook_allow",
        # Read and checked only where an `email:` destination is submitted or sent.
        "smtp_url",
        "smtp_from",
        "email_domains",
    }
)
DEFAULT_SECRET_FILE = ".pressroom-secret"


class ReadSettings(NamedTuple):
    """What a read command needs: the SQLite file or the PostgreSQL conninfo (one of the two),
    the caller's token, the review reminder (seconds)."""

    sqlite_path: Path | None
    token: str | None
    review_reminder: float | None
    postgres: str | None = None


def telemetry_asked(env: Mapping[str, str]) -> bool:
    """Whether any exporter is named, or the SDK is explicitly disabled (which pins the no-op tracer)."""
    if env.get("OTEL_SDK_DISABLED", "").strip():
        return True
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        if any(part.strip() not in ("", "none") for part in env.get(name, "").split(",")):
            return True
    return False


def sqlite_file(url: str) -> Path | None:
    """The file of a plain `sqlite:///PATH` URL (relative to the working folder, as SQLAlchemy reads it)."""
    if not url.startswith(SQLITE_PREFIX):
        return None
    path = url[len(SQLITE_PREFIX) :]
    if not path or path == ":memory:" or any(c in path for c in "?%#") or path.startswith("file:"):
        return None
    return Path(path)


def postgres_conninfo(url: str) -> str | None:
    """The libpq URL of a plain `postgresql+psycopg://…` database URL (no query, no fragment)."""
    if not url.startswith(POSTGRES_PREFIX) or any(c in url for c in "?#"):
        return None
    rest = url[len(POSTGRES_PREFIX) :]
    return "postgresql://" + rest if rest else None


def read_settings(environ: Mapping[str, str]) -> ReadSettings | None:
    """The read settings of `environ`, or None when `Settings()` must decide (module docstring)."""
    if telemetry_asked(environ):
        return None
    values: dict[str, str] = {}
    for key, value in environ.items():
        lowered = key.lower()
        if not lowered.startswith(PREFIX):
            continue
        field = lowered[len(PREFIX) :]
        if field not in ACCEPTED or field in values:
            return None
        values[field] = value
    url = values.get("database_url", "sqlite:///pressroom.db")
    path, postgres = sqlite_file(url), postgres_conninfo(url)
    if path is None and postgres is None:
        return None
    if "secret" not in values:
        # Settings would create the signing key on first use: leave that to the full path.
        secret_file = Path(values.get("secret_file", DEFAULT_SECRET_FILE))
        if not secret_file.is_file() or not os.access(secret_file, os.R_OK):
            return None
    try:
        check_webhook_allow(values.get("webhook_allow"))  # as Settings checks it
    except ValueError:
        return None
    reminder: float | None = None
    if values.get("review_reminder"):
        from orchestrator.core.durations import seconds

        try:
            reminder = seconds(values["review_reminder"])
        except Exception:
            return None
    return ReadSettings(
        sqlite_path=path, token=values.get("token"), review_reminder=reminder, postgres=postgres
    )


def from_environment() -> ReadSettings | None:
    """`read_settings` of this process's environment."""
    return read_settings(os.environ)  # noqa: TID251  (the read path's one look at it; see the docstring)


__all__ = [
    "ACCEPTED",
    "ReadSettings",
    "from_environment",
    "postgres_conninfo",
    "read_settings",
    "sqlite_file",
    "telemetry_asked",
]

"""Settings: the only module that reads the environment.

Every name is the one DESIGN.md publishes (`PRESSROOM_*`); entry points and
tests build a `Settings` and hand it to `bootstrap.build_app`.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.core.host_lists import check_webhook_allow, origin_list

DEFAULT_DATABASE_URL = "sqlite:///pressroom.db"
DEFAULT_BROKER_URL = "inline://"
DEFAULT_LINK_TIMEOUT = 15.0


class Settings(BaseSettings):
    """Configuration, environment first."""

    model_config = SettingsConfigDict(env_prefix="PRESSROOM_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    broker_url: str = Field(
        default=DEFAULT_BROKER_URL,
        description="redis://… or amqp://… for separate processes; inline:// runs "
        "each command's queued work in the same process",
    )
    secret: SecretStr | None = Field(default=None, description="approval signing key")
    secret_file: Path = Field(
        default=Path(".pressroom-secret"),
        description="where the signing key is created (0600) when PRESSROOM_SECRET is unset",
    )
    destination_timeout: float = Field(default=10.0, gt=0)
    # At most this many publish calls in flight to one destination per worker process;
    # a saga's destinations are published concurrently. Half the publisher's default
    # pool (`worker_pools.PUBLISHER_CONCURRENCY`), so one slow destination leaves the
    # other half of its threads to the others; unless set, a worker with a smaller
    # threads pool takes half of its own (`worker_pools.destination_limit`).
    destination_concurrency: int = Field(default=8, ge=1, le=64)
    lease_seconds: float = Field(default=60.0, gt=0)
    webhook_allow: str | None = Field(
        default=None,
        description="host names, addresses or CIDR ranges (commas or spaces) that webhooks may reach "
        "although they are loopback, private, link-local or metadata addresses; unset: none",
    )
    # The `email:` destination (sagas/destinations/email.py), which reads and checks these itself.
    smtp_url: SecretStr | None = Field(
        default=None,
        description="smtp://[user:password@]HOST[:PORT], or smtps:// for implicit TLS: where email: "
        "destinations send; unset: they are refused at submit",
    )
    smtp_from: str | None = Field(default=None, description="the From address of email: destinations")
    email_domains: str | None = Field(
        default=None,
        description="recipient domains (commas or spaces) email: destinations may mail, checked at submit "
        "and again before each send; unset or empty: every email: destination is refused",
    )
    max_destinations: int = Field(default=20, ge=1, le=1000, description="destinations per saga, at most")
    live_streams_per_user: int = Field(
        default=8, ge=1, le=1000, description="open live-update streams (saga pages) per user; more: HTTP 429"
    )
    live_streams_total: int = Field(
        default=256, ge=1, le=100000, description="open live-update streams per serve process; more: HTTP 429"
    )
    max_attempts: int = Field(default=5, ge=1, description="lease recoveries before a saga fails")
    approval_ttl: float = Field(default=24 * 3600.0, gt=0, description="default approval expiry, seconds")
    max_review_rounds: int = Field(default=2, ge=0)
    saga_budget: int = Field(
        default=200,
        ge=0,
        description="tool calls a saga's agents may make in all, kept durably and charged with each "
        "call's intent (a turn re-run after a crash continues the count); 0: no limit",
    )
    relay_poll: float = Field(default=1.0, gt=0, description="relay idle poll interval, seconds")
    relay_grace: float = Field(
        default=2.0,
        ge=0,
        description="age before the relay sends a row its writer has not marked sent (writers mark "
        "in batches every 50 ms: a grace below that sends rows twice, deduplicated by the inbox)",
    )
    allowed_roots: str | None = Field(
        default=None,
        description="folders (joined by ':') that corpora and site:/git: destinations must lie in; "
        "unset: anywhere the process may read and write",
    )
    index_dir: Path | None = Field(
        default=None,
        description="folder of the corpus indexes (one SQLite file per corpus); unset: "
        "'<database file>-index' beside a SQLite database, else '.pressroom-index' beside the secret file",
    )
    pipelines_dir: Path | None = Field(
        default=None,
        description="folder of pipeline TOML files (NAME.toml); unset: only the pipelines the project ships. "
        "A file here takes the place of a shipped one of the same name",
    )
    link_hosts: str | None = Field(
        default=None,
        description="hosts (joined by ',') that links and images in a version or page may point to; "
        "unset: none, so no external link or image at all",
    )
    # Web sign-in (orchestrator/entrypoints/web/auth.py).
    session_ttl: float = Field(default=8 * 3600.0, gt=0, description="web session lifetime, seconds")
    trusted_proxy_header: str | None = Field(
        default=None, description="header naming the signed-in user, e.g. X-Forwarded-User"
    )
    trusted_proxies: str | None = Field(
        default=None,
        description="addresses/CIDRs (commas or spaces) whose proxy headers are believed; unset: none",
    )
    trace_file: Path | None = Field(
        default=None, description="JSON-lines span file used when OTEL_TRACES_EXPORTER=file"
    )
    trace_url: str | None = Field(
        default=None,
        description="link to a trace in the tracing UI, e.g. http://jaeger:16686/trace/{trace_id}; "
        "unset: the saga page shows the trace id without a link",
    )
    model: str | None = None
    model_base_url: str | None = None
    model_api_key: SecretStr | None = None
    retention: float | None = Field(
        default=None,
        description="a duration (e.g. 30d): the relay prunes finished sagas' bookkeeping older than it; "
        "unset: never",
    )
    reconcile_window: float = Field(
        default=7 * 86400.0,
        description="a duration: ledger rows younger than this are never pruned (a replay or a "
        "reconcile may still need them)",
    )
    review_reminder: float | None = Field(
        default=None, description="a duration: sagas in ready-for-review longer than this are overdue"
    )
    connect_retry: float = Field(
        default=3.0, ge=0, description="seconds to keep retrying a refused database connection"
    )
    db_pool_size: int = Field(
        default=5,
        ge=1,
        le=500,
        description="PostgreSQL connections a process keeps open (5 more may be opened and closed "
        "under load); unset, a threads-pool worker keeps 2 per thread",
    )
    link_timeout: float = Field(
        default=DEFAULT_LINK_TIMEOUT,
        gt=0,
        le=3600,
        description="seconds a connection to PostgreSQL or Redis may stay silent before it is given up "
        "and made again (a partition, a failover, a dropped NAT entry): connecting, a Redis command, "
        "a consumer's wait; on PostgreSQL also TCP keepalives and TCP_USER_TIMEOUT",
    )
    broker_max_retries: int = Field(
        default=60,
        ge=1,
        description="times a worker retries a lost broker connection before it exits non-zero",
    )
    mcp_tokens: str | None = Field(
        default=None,
        description="retired: MCP over HTTP takes users' tokens (`pressroom users add`); refused when set",
    )
    mcp_allowed_origins: str | None = Field(
        default=None,
        description="origins (commas or spaces; https://HOST[:PORT], :* for any port) whose pages, and "
        "the Host of whose URL, `pressroom mcp --transport http` serves besides loopback; unset: loopback only",
    )
    token: SecretStr | None = Field(
        default=None, description="the caller's API token in closed mode (CLI, MCP over stdio)"
    )

    @field_validator("trace_url")
    @classmethod
    def _trace_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if (
            not re.match(r"https?://[^\s/]+", value)
            or "{trace_id}" not in value
            or any(c.isspace() or c in "<>\"'" for c in value)
        ):
            raise ValueError("PRESSROOM_TRACE_URL must be an http(s) URL holding {trace_id}")
        return value

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        if not value.startswith(("sqlite:", "postgresql")):
            raise ValueError("database URL must be sqlite:///PATH or postgresql+psycopg://…")
        return value

    @field_validator("retention", "reconcile_window", "review_reminder", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        if value is None or value == "":
            return None
        from orchestrator.core.durations import seconds

        try:
            return seconds(value if isinstance(value, int | float) else str(value))
        except Exception as exc:
            raise ValueError(str(exc)) from None

    @field_validator("trusted_proxy_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        if value and not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}", value):
            raise ValueError(f"not an HTTP header name: {value!r}")
        return value or None

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str | None) -> str | None:
        for item in (value or "").replace(",", " ").split():
            ipaddress.ip_network(item, strict=False)  # ValueError names the bad entry
        return value

    @field_validator("webhook_allow")
    @classmethod
    def _webhook_hosts(cls, value: str | None) -> str | None:
        # Read in full by `sagas.destinations.webhook_urls.WebhookAllow.parse`; refused early here.
        check_webhook_allow(value)
        return value

    @field_validator("mcp_allowed_origins")
    @classmethod
    def _mcp_origins(cls, value: str | None) -> str | None:
        origin_list(value)  # ValueError names the bad entry; the MCP server reads it in full
        return value

    def roots(self) -> list[Path]:
        """The allowed roots, resolved; empty when any folder is allowed."""
        if not self.allowed_roots:
            return []
        return [Path(p).expanduser().resolve() for p in self.allowed_roots.split(os.pathsep) if p.strip()]

    def index_folder(self) -> Path:
        """Where the corpus indexes live."""
        if self.index_dir is not None:
            return self.index_dir.expanduser()
        prefix = "sqlite:///"
        if self.database_url.startswith(prefix) and self.database_url[len(prefix) :] not in ("", ":memory:"):
            db = Path(self.database_url[len(prefix) :].split("?", 1)[0]).expanduser()
            return db.with_name(db.name + "-index")
        return self.secret_file.expanduser().parent / ".pressroom-index"

    def allowed_link_hosts(self) -> frozenset[str]:
        """`PRESSROOM_LINK_HOSTS` as lower-case host names."""
        hosts = (self.link_hosts or "").replace(os.pathsep, ",").split(",")
        return frozenset(h.strip().lower().rstrip(".") for h in hosts if h.strip())

    def signing_key(self) -> bytes:
        """The approval signing key; created with mode 0600 on first use."""
        if self.secret is not None:
            return self.secret.get_secret_value().encode()
        path = self.secret_file
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
        return path.read_text().strip().encode()


def environ_snapshot(prefix: str = "OTEL_") -> dict[str, str]:
    """The standard variables other libraries read, for diagnostics only."""
    return {k: v for k, v in os.environ.items() if k.startswith(prefix)}


def named_secret(variable: str) -> SecretStr | None:
    """The value of the variable a declared file names for a secret (a model profile's
    `api_key_env`), read when it is needed, so the secret itself is never in a file; None when
    the variable is unset or empty."""
    value = os.environ.get(variable)
    return SecretStr(value) if value else None


__all__ = [
    "DEFAULT_BROKER_URL",
    "DEFAULT_DATABASE_URL",
    "DEFAULT_LINK_TIMEOUT",
    "Settings",
    "environ_snapshot",
    "named_secret",
]

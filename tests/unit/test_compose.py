"""docker-compose.yml and the Dockerfile agree with the code they run.

No Docker here: the files are read as data and checked against the click
commands, the Settings fields, the role queues and the telemetry parser, so
a typo in a subcommand, a flag, a queue or a variable name fails this test
instead of a user's `docker compose up`.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml

from orchestrator.core.config import Settings
from orchestrator.core.routing import QUEUES
from orchestrator.entrypoints.cli import cli
from orchestrator.entrypoints.http import Api
from orchestrator.entrypoints.processes import sized_settings
from orchestrator.entrypoints.worker_pools import default_concurrency, default_pool
from orchestrator.store.db import POOL_OVERFLOW
from telemetry.setup import TelemetrySettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

# Standard OpenTelemetry SDK variables a deployment may set. OTEL_SERVICE_NAME
# is left out on purpose: each process names itself (pressroom-relay,
# pressroom-worker-<queue>, pressroom-api), and one shared name would merge them.
OTEL_ALLOWED = frozenset(
    {
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
        "OTEL_METRICS_EXPORTER",
        "OTEL_LOGS_EXPORTER",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_INSECURE",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_TRACES_SAMPLER",
        "OTEL_TRACES_SAMPLER_ARG",
        "OTEL_BSP_SCHEDULE_DELAY",
        "OTEL_BSP_EXPORT_TIMEOUT",
    }
)
OTLP_PORTS = {"grpc": 4317, "http/protobuf": 4318}

# Compose interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR?err}.
_INTERPOLATION = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: str) -> str:
    """The value as compose would pass it when only the required variables are set."""

    def one(match: re.Match[str]) -> str:
        if match["op"] in (":-", "-"):
            return match["arg"]
        return f"operator-supplied-{match['name'].lower()}"

    return _INTERPOLATION.sub(one, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


@pytest.fixture(scope="module")
def pressroom(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The services built from this repository's Dockerfile."""
    built = {name: svc for name, svc in services.items() if _builds_here(svc)}
    assert built, "no service is built from the Dockerfile (build: .)"
    return built


def _builds_here(service: dict[str, Any]) -> bool:
    build = service.get("build")
    if isinstance(build, dict):
        return build.get("context") in (".", "./") and build.get("dockerfile", "Dockerfile") == "Dockerfile"
    return build in (".", "./")


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the KEY=VALUE list form
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _command(name: str, service: dict[str, Any]) -> list[str]:
    command = service.get("command")
    assert isinstance(command, list) and command, f"{name}: command must be a non-empty exec-form list"
    return [str(part) for part in command]


def _dependencies(service: dict[str, Any]) -> set[str]:
    depends = service.get("depends_on") or {}
    return set(depends) if isinstance(depends, dict | list) else set()


def _option(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _check_invocation(where: str, args: list[str]) -> None:
    """`args` (after `pressroom`) name a real subcommand with real options that parse."""
    group: click.Command = cli
    sub, rest = args[0], args[1:]
    while True:  # `users add …`: down through the groups to the command that runs
        assert isinstance(group, click.Group)
        command = group.commands.get(sub)
        assert command is not None, (
            f"{where}: {sub!r} is not a pressroom subcommand ({sorted(group.commands)})"
        )
        if not isinstance(command, click.Group) or not rest:
            break
        group, sub, rest = command, rest[0], rest[1:]
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    for arg in rest:
        if arg.startswith("-"):
            flag = arg.split("=", 1)[0]
            assert flag in known, f"{where}: `pressroom {sub}` has no option {flag} ({sorted(known)})"
    # The values must parse too (types, choices, missing arguments); nothing runs.
    with command.make_context(sub, list(rest)) as ctx:
        assert ctx.command is command


def _dockerfile_final_stage() -> list[str]:
    """Instructions of the last stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    starts = [i for i, ln in enumerate(lines) if ln.upper().startswith("FROM ")]
    assert starts, "Dockerfile has no FROM"
    return lines[starts[-1] :]


def _exec_form(stage: list[str], instruction: str) -> list[str]:
    found = [ln for ln in stage if ln.upper().startswith(instruction + " ")]
    assert found, f"the final stage has no {instruction}"
    value = json.loads(found[-1].split(None, 1)[1])  # the last one wins, as in Docker
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"{instruction} exec form"
    return list(value)


# -- commands -----------------------------------------------------------------


def test_every_pressroom_service_runs_a_real_subcommand_with_real_flags(
    pressroom: dict[str, dict[str, Any]],
) -> None:
    for name, service in pressroom.items():
        _check_invocation(name, _command(name, service))


def test_the_expected_processes_are_all_there(pressroom: dict[str, dict[str, Any]]) -> None:
    subcommands = Counter(_command(n, s)[0] for n, s in pressroom.items())
    assert subcommands["relay"] == 1, "exactly one relay"
    assert subcommands["serve"] == 1, "exactly one API"
    assert subcommands["worker"] >= 1


def test_workers_cover_each_role_queue_exactly_once(pressroom: dict[str, dict[str, Any]]) -> None:
    served: Counter[str] = Counter()
    for name, service in pressroom.items():
        args = _command(name, service)
        if args[0] != "worker":
            continue
        queues = _option(args, "--queues")
        assert queues, f"{name}: a worker must name its queues (the default is all of them)"
        served.update(q.strip() for q in queues.split(",") if q.strip())
    assert set(served) == set(QUEUES), f"workers serve {sorted(served)}, the queues are {sorted(QUEUES)}"
    assert all(n == 1 for n in served.values()), f"a queue is served twice: {served}"


def test_the_api_listens_on_all_interfaces_and_publishes_its_port(
    services: dict[str, dict[str, Any]],
) -> None:
    api = services["api"]
    args = _command("api", api)
    assert args[0] == "serve"
    assert _option(args, "--host") == "0.0.0.0", "127.0.0.1 inside a container is unreachable"
    port = _option(args, "--port")
    assert port is not None
    published = [str(p).rsplit(":", 1)[-1] for p in api.get("ports", [])]
    assert port in published, f"serve listens on {port}, compose publishes {published}"
    test = api.get("healthcheck", {}).get("test")
    assert test and f":{port}/" in " ".join(test), "the API healthcheck must probe the port serve listens on"


def health_probe(services: dict[str, dict[str, Any]]) -> tuple[list[str], str]:
    """The API's healthcheck as an argv (after CMD) and the URL it asks."""
    test = services["api"].get("healthcheck", {}).get("test")
    assert isinstance(test, list) and test[0] == "CMD", "the API healthcheck must be an exec-form CMD list"
    urls = re.findall(r"https?://[^'\"\s]+", " ".join(test))
    assert len(urls) == 1, f"the API healthcheck should ask one URL, found {urls}"
    return [str(part) for part in test[1:]], urls[0]


def test_the_api_healthcheck_asks_healthz_without_a_token(services: dict[str, dict[str, Any]]) -> None:
    # Any /api route answers 401 once a user exists, and the container would turn unhealthy;
    # /healthz answers 200 with no token in either mode (tests/e2e/test_compose_native.py runs it).
    argv, url = health_probe(services)
    assert urlsplit(url).path == "/healthz", f"the healthcheck asks {url}"
    assert not any(word in " ".join(argv).lower() for word in ("authorization", "bearer", "token"))
    healthz = [r for r in Api.routes(Api.__new__(Api)) if getattr(r, "path", None) == "/healthz"]
    assert healthz and "GET" in (healthz[0].methods or set()), "the API has no GET /healthz route"


# `docker compose run [--rm] [-e VAR] SERVICE ARGS…` as the deploy guide and the compose file write it.
_RUN = re.compile(r"docker compose run\s+(?P<rest>.+)")


def _documented_runs(text: str) -> list[list[str]]:
    """Every `docker compose run` in `text` (comment markers and continuation lines joined)."""
    lines = [re.sub(r"^\s*#\s?", "", ln) for ln in text.splitlines()]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    runs = []
    for match in _RUN.finditer(joined):
        words = shlex.split(match["rest"].split(" # ", 1)[0].split("`", 1)[0])
        runs.append(words)
    return runs


def test_documented_compose_runs_are_real_commands(services: dict[str, dict[str, Any]]) -> None:
    """The first user, the token, and every command the guide runs in a one-off container."""
    sources = {
        "docs/deploy.md": (ROOT / "docs" / "deploy.md").read_text(),
        "docker-compose.yml": COMPOSE.read_text(),
    }
    checked = 0
    for where, text in sources.items():
        for words in _documented_runs(text):
            i = 0
            env: list[str] = []
            while words[i].startswith("-"):
                if words[i] == "--entrypoint":
                    break
                if words[i] == "-e":
                    env.append(words[i + 1])
                    i += 1
                i += 1
            if words[i] == "--entrypoint":
                continue  # another program in the image (git), not pressroom
            service, args = words[i], words[i + 1 :]
            assert service in services, f"{where}: `docker compose run` of unknown service {service!r}"
            _check_invocation(f"{where}: {' '.join(words)}", args)
            first_user = args[:2] == ["users", "add"] and "admin" in args and not env
            assert env == ["PRESSROOM_TOKEN"] or first_user, (
                f"{where}: `{' '.join(words)}` runs in closed mode without -e PRESSROOM_TOKEN"
            )
            checked += 1
        assert re.search(r"users add \w+ --role admin", text), (
            f"{where} does not say how to add the first user"
        )
        assert "-e PRESSROOM_TOKEN" in text, f"{where} does not say how to give a command a token"
        flat = " ".join(text.split()).lower()
        assert "has no authentication" not in flat, f"{where} still says the API has no authentication"
        assert "design.md" not in flat, f"{where} cites a DESIGN.md the repository does not hold"
    assert checked >= 8


# -- environment --------------------------------------------------------------


def test_environment_names_are_settings_or_standard_otel(pressroom: dict[str, dict[str, Any]]) -> None:
    settings = {"PRESSROOM_" + field.upper() for field in Settings.model_fields}
    for name, service in pressroom.items():
        env = _environment(service)
        assert env, f"{name}: no environment"
        for key in env:
            if key.startswith("PRESSROOM_"):
                assert key in settings, f"{name}: {key} is not a Settings field ({sorted(settings)})"
            else:
                assert key in OTEL_ALLOWED, f"{name}: {key} is neither a Settings field nor an allowed OTEL_*"
        assert "OTEL_SERVICE_NAME" not in env, f"{name}: would override the process's own service name"


def test_environment_values_parse(
    pressroom: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, service in pressroom.items():
        env = {k: interpolate(v) for k, v in _environment(service).items()}
        for field in Settings.model_fields:
            monkeypatch.delenv("PRESSROOM_" + field.upper(), raising=False)
        for key, value in env.items():
            if key.startswith("PRESSROOM_"):
                monkeypatch.setenv(key, value)
        settings = Settings()
        assert settings.database_url.startswith("postgresql+psycopg://"), name
        assert urlsplit(settings.database_url).hostname in _dependencies(service), name
        assert settings.broker_url.startswith("redis://"), name
        assert urlsplit(settings.broker_url).hostname in _dependencies(service), name
        telemetry = TelemetrySettings.from_env_mapping(
            {k: v for k, v in env.items() if k.startswith("OTEL_")}
        )
        assert telemetry.traces_exporters == ("otlp",), name


def test_the_signing_key_is_required_and_never_defaulted(pressroom: dict[str, dict[str, Any]]) -> None:
    for name, service in pressroom.items():
        secret = _environment(service).get("PRESSROOM_SECRET", "")
        assert re.fullmatch(r"\$\{PRESSROOM_SECRET:\?[^}]+\}", secret), (
            f"{name}: PRESSROOM_SECRET must come from the operator as ${{PRESSROOM_SECRET:?...}}, got {secret!r}"
        )
    for line in DOCKERFILE.read_text().splitlines():
        if line.strip().upper().startswith(("ENV ", "ARG ")):
            assert "PRESSROOM_SECRET" not in line, "the signing key must not be baked into the image"
    ignored = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".env", ".pressroom-secret"} <= ignored, "keep local secrets out of the build context"


# -- services they depend on -------------------------------------------------


def test_redis_and_postgres_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    probes = {"redis": ["redis-cli", "ping"], "postgres": ["pg_isready"]}
    for name, words in probes.items():
        test = services[name].get("healthcheck", {}).get("test")
        assert test, f"{name} has no healthcheck"
        flat = test if isinstance(test, str) else " ".join(test)
        assert all(w in flat for w in words), f"{name} healthcheck should run {' '.join(words)}"


def test_pressroom_services_wait_for_healthy_redis_and_postgres(pressroom: dict[str, dict[str, Any]]) -> None:
    for name, service in pressroom.items():
        depends = service.get("depends_on")
        assert isinstance(depends, dict), f"{name}: depends_on needs the long form with conditions"
        for dep in ("redis", "postgres"):
            assert depends.get(dep, {}).get("condition") == "service_healthy", f"{name} must wait for {dep}"


def test_jaeger_accepts_otlp_where_the_services_send_it(
    services: dict[str, dict[str, Any]], pressroom: dict[str, dict[str, Any]]
) -> None:
    jaeger = services["jaeger"]
    assert str(jaeger["image"]).startswith("jaegertracing/all-in-one")
    assert str(_environment(jaeger).get("COLLECTOR_OTLP_ENABLED")).lower() == "true"
    published = {str(p).rsplit(":", 1)[-1] for p in jaeger.get("ports", [])}
    assert {"16686", "4317", "4318"} <= published
    for name, service in pressroom.items():
        env = _environment(service)
        endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
        protocol = env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        assert endpoint.hostname == "jaeger", f"{name}: OTLP goes to {endpoint.hostname}, not jaeger"
        assert endpoint.port == OTLP_PORTS[protocol], f"{name}: {protocol} is port {OTLP_PORTS[protocol]}"


def test_named_volumes_are_declared(compose: dict[str, Any], pressroom: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in pressroom.items():
        for mount in service.get("volumes", []):
            source = str(mount).split(":", 1)[0]
            if not source.startswith((".", "/", "~")):
                assert source in declared, f"{name}: volume {source!r} is not declared"
            elif source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: bind source {source} does not exist"


# -- the image ----------------------------------------------------------------


def test_dockerfile_entrypoint_is_the_console_script_and_cmd_is_valid() -> None:
    stage = _dockerfile_final_stage()
    assert _exec_form(stage, "ENTRYPOINT") == ["pressroom"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts.get("pressroom") == "orchestrator.entrypoints.cli:run"
    _check_invocation("Dockerfile CMD", _exec_form(stage, "CMD"))
    users = [ln.split(None, 1)[1] for ln in stage if ln.upper().startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), "the image must run as a non-root user"


# -- database connections -------------------------------------------------------


def _connections(args: list[str]) -> int:
    """What one service's database pool may hold at once: its size, as `pressroom worker`
    sizes it from its pool and concurrency (`sized_settings`), plus the overflow."""
    settings = Settings.model_construct()  # the defaults, none of them set
    if args[0] == "worker":
        queues = [q.strip() for q in (_option(args, "--queues") or "").split(",") if q.strip()]
        pool = _option(args, "--pool") or default_pool(queues)
        concurrency = int(_option(args, "--concurrency") or default_concurrency(queues, pool))
        settings = sized_settings(settings, pool, concurrency)
    return settings.db_pool_size + POOL_OVERFLOW


def test_the_topology_s_pools_fit_its_postgres_and_the_deploy_guide_says_how_many(
    services: dict[str, dict[str, Any]], pressroom: dict[str, dict[str, Any]]
) -> None:
    total = sum(_connections(_command(n, s)) for n, s in pressroom.items())
    settings = _command("postgres", services["postgres"])
    limit = int(next(a.split("=", 1)[1] for a in settings if a.startswith("max_connections=")))
    reserved = 3  # PostgreSQL's superuser_reserved_connections
    command = _connections(["status"])  # a `pressroom` command an operator runs beside the services
    assert total + command + reserved <= limit, (
        f"the pools allow {total} connections, a command {command} more; max_connections is {limit}"
    )
    guide = " ".join((ROOT / "docs" / "deploy.md").read_text(encoding="utf-8").split())
    assert f"allow at most {total} connections" in guide
    assert f"max_connections={limit}" in guide

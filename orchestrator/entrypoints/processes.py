"""Long-running and tooling commands: worker, relay, serve, mcp, demo, evidence, eval."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from orchestrator.config import Settings
from orchestrator.errors import InvalidInput
from orchestrator.routing import QUEUES


def _queues(text: str) -> list[str]:
    names = [q.strip() for q in text.split(",") if q.strip()]
    unknown = [q for q in names if q not in QUEUES]
    if not names or unknown:
        raise InvalidInput(f"unknown queue(s) {', '.join(unknown) or text!r}; known: {', '.join(QUEUES)}")
    return names


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def register(cli: click.Group, pass_ctx: Any) -> None:
    @cli.command()
    @click.option(
        "--queues", default=",".join(QUEUES), show_default=True, help="Comma-separated role queues."
    )
    @click.option("--concurrency", type=int, default=1, show_default=True)
    @click.option(
        "--pool", type=click.Choice(["prefork", "solo", "threads"]), default="prefork", show_default=True
    )
    @click.option("--loglevel", default="INFO", show_default=True)
    def worker(queues: str, concurrency: int, pool: str, loglevel: str) -> None:
        """A Celery worker for role queues (needs PRESSROOM_BROKER_URL)."""
        names = _queues(queues)
        settings = Settings()
        if not settings.broker_url.startswith(("redis", "rediss", "amqp", "pyamqp")):
            raise InvalidInput("pressroom worker needs PRESSROOM_BROKER_URL=redis://… or amqp://…")
        from orchestrator.celery_app import make_celery, set_worker_queues
        from orchestrator.observability import start_tracing

        set_worker_queues(names)
        if pool != "prefork":
            start_tracing("pressroom-worker-" + "-".join(names), settings)
        celery = make_celery(settings.broker_url)
        celery.worker_main(
            [
                "worker",
                "-Q",
                ",".join(names),
                "--concurrency",
                str(concurrency),
                "--pool",
                pool,
                "--loglevel",
                loglevel,
                "-n",
                f"pressroom-{'-'.join(names)}@%h",
                "--without-gossip",
                "--without-mingle",
            ]
        )

    @cli.command()
    @click.option("--once", is_flag=True, help="Send what is pending, sweep leases once, and exit.")
    @pass_ctx  # type: ignore[untyped-decorator]
    def relay(ctx: Any, once: bool) -> None:
        """The outbox relay: unsent rows to the broker, and lease recovery."""
        from orchestrator.observability import count_sagas_by_state
        from telemetry.metrics import set_saga_state_counter

        app = ctx.app("pressroom-relay")
        assert app.relay is not None
        set_saga_state_counter(count_sagas_by_state(app.engine))
        if once:
            sent = app.relay.run_once()
            recovered = app.relay.sweep()
            click.echo(f"sent {sent}, recovered {recovered}")
            return
        stop = _stop_on_signals()
        click.echo(f"relay running on {app.broker.system}; Ctrl-C stops it", err=True)
        app.relay.run_forever(stop)

    @cli.command()
    @click.option("--host", default="127.0.0.1", show_default=True)
    @click.option("--port", type=int, default=8080, show_default=True)
    def serve(host: str, port: int) -> None:
        """HTTP API and the reviewers' pages."""
        from orchestrator.entrypoints.http import serve as run_http

        run_http(host=host, port=port)

    @cli.command()
    @click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
    @click.option("--host", default="127.0.0.1", show_default=True)
    @click.option("--port", type=int, default=8765, show_default=True)
    @click.option("--as", "actor", default=None, help="Identity over stdio (open mode; default mcp-client).")
    @click.option("--capabilities", default=None, help="Comma-separated capabilities over stdio.")
    def mcp(transport: str, host: str, port: int, actor: str | None, capabilities: str | None) -> None:
        """MCP server over the same registry and policy."""
        from orchestrator.entrypoints.mcp_server import run_mcp

        run_mcp(transport=transport, host=host, port=port, actor=actor, capabilities=capabilities)

    @cli.command()
    @click.option(
        "--workdir", default="pressroom-demo", show_default=True, help="Where the demo keeps its files."
    )
    @click.option("--approve-as", default=None, help="Approve without asking, as this person.")
    @click.option("--brief", default=None, help="Another brief for the sample corpus.")
    def demo(workdir: str, approve_as: str | None, brief: str | None) -> None:
        """Everything in one process on embedded defaults, start to published."""
        from orchestrator.entrypoints.demo import run_demo

        raise SystemExit(run_demo(workdir=workdir, approve_as=approve_as, brief=brief))

    @cli.command()
    @click.argument("suite", type=click.Choice(["harness"]))
    @click.option("--out", default="evidence/harness.json", show_default=True)
    def evidence(suite: str, out: str) -> None:
        """Run the harness fault-injection suite and write measured evidence."""
        from orchestrator.entrypoints.evidence import run_evidence

        run_evidence(out)

    @cli.command(name="eval")
    @click.option("--cases", default="examples/eval", show_default=True)
    @click.option("--out", default=None, help="Also write a markdown report here.")
    @click.option("--json", "as_json", is_flag=True)
    def evaluate(cases: str, out: str | None, as_json: bool) -> None:
        """Run the evaluation briefs and print per-brief and total measures."""
        from orchestrator.entrypoints.evaluate import run_eval

        run_eval(cases, out, as_json)


__all__ = ["register"]

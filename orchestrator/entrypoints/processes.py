"""Long-running and tooling commands: worker, relay, serve, mcp, demo, evidence, eval, compare."""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING, Any

import click

from orchestrator.core.errors import InvalidInput
from orchestrator.core.routing import QUEUES
from orchestrator.entrypoints.worker_pools import (
    PUBLISHER,
    PUBLISHER_CONCURRENCY,
    ROLE_CONCURRENCY,
    ROLE_QUEUES,
    WAITING_DELIVERIES,
    PublisherChild,
    db_pool_size,
    default_concurrency,
    default_pool,
    destination_limit,
    shares_publisher,
    waiting_loops,
)

if TYPE_CHECKING:
    from orchestrator.core.config import Settings
    from orchestrator.pressroom import Pressroom


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


def _worker(queues: str | None, concurrency: int | None, pool: str | None, loglevel: str) -> None:
    from orchestrator.core.config import Settings

    names = _queues(queues) if queues is not None else list(ROLE_QUEUES)
    if concurrency is not None and concurrency < 1:
        raise InvalidInput(f"--concurrency must be at least 1, got {concurrency}")
    settings = Settings()
    if not settings.broker_url.startswith(("redis", "rediss", "amqp", "pyamqp")):
        raise InvalidInput("pressroom worker needs PRESSROOM_BROKER_URL=redis://… or amqp://…")
    if shares_publisher(names):
        click.echo(
            "note: the publisher queue shares this worker; a slow destination holds up the other "
            "queues (run `pressroom worker --queues publisher` on its own instead)",
            err=True,
        )
    chosen = pool or default_pool(names)
    size = concurrency or default_concurrency(names, chosen)
    child = PublisherChild(loglevel, None) if queues is None else None
    if child is not None:
        child.start()
    try:
        code = _run_celery_worker(names, size, chosen, loglevel, settings)
    finally:
        child_code = child.stop() if child is not None else 0
    if code or child_code:
        raise SystemExit(code or child_code)  # non-zero: the supervisor restarts the worker


def sized_settings(settings: Settings, pool: str, concurrency: int) -> Settings:
    """`settings` with the database pool this worker process needs (`db_pool_size`) and the
    share of its threads one destination may take (`destination_concurrency`)."""
    given = settings.model_fields_set
    connections = db_pool_size(pool, concurrency, settings.db_pool_size, explicit="db_pool_size" in given)
    limit = destination_limit(
        pool, concurrency, settings.destination_concurrency, explicit="destination_concurrency" in given
    )
    return settings.model_copy(update={"db_pool_size": connections, "destination_concurrency": limit})


def worker_app(settings: Settings, pool: str, concurrency: int) -> Pressroom:
    """A worker process's Pressroom: its deliveries that wait on a model give their thread back
    (`outbox.waits`: one waiting loop per thread; without the `greenlet` package they hold it)."""
    from orchestrator.bootstrap import build_app
    from outbox.waits import GREENLETS, Waits

    app = build_app(settings)
    if GREENLETS:
        app.consumer.waits = Waits(threads=waiting_loops(pool, concurrency), capacity=WAITING_DELIVERIES)
    return app


def _run_celery_worker(names: list[str], concurrency: int, pool: str, loglevel: str, settings: Any) -> int:
    from orchestrator.celery_app import make_celery, run_worker, set_worker_queues, use_app_factory
    from orchestrator.observability import start_tracing

    set_worker_queues(names)
    sized = sized_settings(settings, pool, concurrency)
    if PUBLISHER in names:
        limit = sized.destination_concurrency
        click.echo(
            f"publisher: at most {limit} call{'s' * (limit != 1)} in flight to one destination "
            f"from this process (PRESSROOM_DESTINATION_CONCURRENCY; pool: {pool} × {concurrency})",
            err=True,
        )
    use_app_factory(lambda: worker_app(sized, pool, concurrency))
    if pool != "prefork":
        start_tracing("pressroom-worker-" + "-".join(names), settings)
    celery = make_celery(
        settings.broker_url, max_retries=settings.broker_max_retries, link_timeout=settings.link_timeout
    )
    return run_worker(
        celery,
        [
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
        ],
    )


def register(cli: click.Group, pass_ctx: Any) -> None:
    @cli.command()
    @click.option(
        "--queues",
        default=None,
        help="Comma-separated role queues. Default: researcher, writer and reviewer in this worker, "
        "and publisher in a worker process of its own on a threads pool.",
    )
    @click.option(
        "--concurrency",
        type=int,
        default=None,
        help=f"Pool size. Default: {PUBLISHER_CONCURRENCY} threads for --queues publisher, "
        f"{ROLE_CONCURRENCY} threads for role queues, 1 for --pool prefork or solo.",
    )
    @click.option(
        "--pool",
        type=click.Choice(["prefork", "solo", "threads"]),
        default=None,
        help="Default: threads. prefork runs tasks in child processes, solo one at a time in the worker itself.",
    )
    @click.option("--loglevel", default="INFO", show_default=True)
    def worker(queues: str | None, concurrency: int | None, pool: str | None, loglevel: str) -> None:
        """A Celery worker for role queues (needs PRESSROOM_BROKER_URL)."""
        _worker(queues, concurrency, pool, loglevel)

    @cli.command()
    @click.option("--once", is_flag=True, help="Send what is pending, sweep leases once, and exit.")
    @pass_ctx  # type: ignore[untyped-decorator]
    def relay(ctx: Any, once: bool) -> None:
        """The outbox relay: unsent rows to the broker, and lease recovery."""
        from orchestrator.observability import count_sagas_by_state
        from telemetry.metrics import set_overdue_reviews_counter, set_saga_state_counter

        app = ctx.app("pressroom-relay")
        set_saga_state_counter(count_sagas_by_state(app.engine))
        set_overdue_reviews_counter(app.operations.count_overdue_reviews())
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
        from evaluation.evidence import run_evidence

        run_evidence(out)

    @cli.command(name="eval")
    @click.option("--cases", default="examples/eval", show_default=True)
    @click.option("--case", "only", multiple=True, help="Run only this case (repeatable).")
    @click.option("--repeat", type=int, default=1, show_default=True, help="Runs per case.")
    @click.option("--record-process", is_flag=True, help="Write each case's tool calls as its process.json.")
    @click.option(
        "--models",
        is_flag=True,
        help="Also run the model profiles: a few cases with every role on a scripted model, once per profile.",
    )
    @click.option(
        "--model-case",
        "model_cases",
        multiple=True,
        help="Run the model profiles on this case (repeatable). Default: canal-locks, injected-instruction.",
    )
    @click.option("--out", default=None, help="Also write a markdown report here.")
    @click.option("--json", "as_json", is_flag=True)
    def evaluate(
        cases: str,
        only: tuple[str, ...],
        repeat: int,
        record_process: bool,
        models: bool,
        model_cases: tuple[str, ...],
        out: str | None,
        as_json: bool,
    ) -> None:
        """Run the evaluation cases and report result, process, safety, recovery and cost."""
        from evaluation.evaluate import run_eval

        run_eval(
            cases,
            out,
            as_json,
            repeat=repeat,
            only=only,
            record_process=record_process,
            models=models,
            model_cases=model_cases,
        )

    @cli.command()
    @click.option("--framework", type=click.Choice(["local", "langgraph"]), required=True)
    @click.option("--json", "as_json", is_flag=True)
    @click.option("--output", default=None, help="Also write the JSON report here.")
    def compare(framework: str, as_json: bool, output: str | None) -> None:
        """The four-column comparison of the harness with a graph framework."""
        from evaluation.compare import run_compare

        raise SystemExit(run_compare(framework, as_json, output))


__all__ = ["register"]

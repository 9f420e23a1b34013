"""`pressroom demo`: the whole pipeline in one process, no servers.

SQLite in a work folder, the in-process broker drained by worker threads,
the sample corpus shipped with the package (one of its sources carries an
injected instruction, which the researcher flags). The saga stops at
ready-for-review and a person at the terminal approves the exact version
shown; then it publishes to a static site folder.
"""

from __future__ import annotations

import queue
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings, environ_snapshot
from orchestrator.core.errors import PressroomError
from orchestrator.entrypoints.render import plural
from orchestrator.pressroom import Pressroom
from outbox.broker import InlineBroker

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "roles" / "sample_corpus"
DEFAULT_BRIEF = "the history and services of the Millbrook public library network"
FINAL = {"succeeded", "failed", "cancelled", "effect-unknown"}

console = Console(highlight=False)
console.soft_wrap = not console.is_terminal  # piped: command lines stay whole, never wrapped


def _workers(app: Pressroom, stop: threading.Event, count: int = 4) -> list[threading.Thread]:
    assert isinstance(app.broker, InlineBroker)
    inbox = app.broker.queue

    def work() -> None:
        while not stop.is_set():
            try:
                envelope = inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                app.consumer.handle(envelope)
            except Exception as exc:  # the lease brings the work back
                console.print(f"[red]work failed[/red] {envelope.task}: {exc}", markup=True)

    def relay() -> None:
        app.relay.run_forever(stop)

    threads = [threading.Thread(target=work, name=f"worker-{i}", daemon=True) for i in range(count)]
    threads.append(threading.Thread(target=relay, name="relay", daemon=True))
    for t in threads:
        t.start()
    return threads


def _follow(
    app: Pressroom, saga_id: str, until: set[str], seen: set[str], timeout: float = 120
) -> dict[str, Any]:
    """Print the saga's new events until its state is in `until`."""
    deadline = time.monotonic() + timeout
    while True:
        for event in app.reads.history(saga_id)["events"]:
            if event["event_id"] in seen:
                continue
            seen.add(event["event_id"])
            line = _describe(event)
            if line:
                console.print(line, markup=False)
        status = app.reads.status(saga_id)
        if status["state"] in until or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def _describe(event: dict[str, Any]) -> str | None:
    kind, detail = event["kind"], event.get("detail") or {}
    if kind == "transition":
        reason = f" ({detail['reason']})" if detail.get("reason") else ""
        return f"  saga → {detail.get('to')}{reason}"
    if kind == "tool_call":
        return f"  {event['actor']:<10} {event['tool']:<18} {event['status']}"
    if kind == "version":
        return f"  writer     version {detail.get('version')} {detail.get('digest', '')[:12]}"
    return None


def _show(app: Pressroom, saga_id: str) -> dict[str, Any]:
    version = app.reads.show(saga_id)
    console.rule(f"v{version['version']} · {version['title']}")
    console.print(f"digest  {version['version_digest']}  by {escape(str(version['author']))}")
    # The approver reads what they approve: the document itself, then its evidence and review.
    console.print(Markdown(version["markdown"]))
    table = Table("marker", "source", "quote", box=None, pad_edge=False)
    for c in version["citations"]:
        table.add_row(c["marker"], c["source"], c["quote"][:90])
    console.print(table)
    review = version.get("review") or {}
    findings = review.get("findings", [])
    console.print(
        f"automated review: [bold]{escape(str(review.get('verdict')))}[/bold], "
        f"{plural(len(findings), 'finding')}"
    )
    for f in findings:
        console.print(f"  - {f.get('rule')} at {f.get('location')}: {f.get('message')}", markup=False)
    for flagged in version.get("suspicious_sources", []):
        console.print(f"[yellow]flagged and kept out:[/yellow] {flagged['source']}", markup=True)
        for reason in flagged["reasons"][:3]:
            console.print(f"    {reason}", markup=False)
    return version


def run_demo(*, workdir: str, approve_as: str | None, brief: str | None) -> int:
    from telemetry.setup import configure_tracing

    work = Path(workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = environ_snapshot()
    configure_tracing(
        "pressroom-demo",
        env=env,
        exporter=None if "OTEL_TRACES_EXPORTER" in env else "file",
        file_path=work / "spans.jsonl",
    )
    settings = Settings(
        database_url=f"sqlite:///{work / 'pressroom.db'}",
        broker_url="inline://",
        secret_file=work / "secret",
        relay_poll=0.2,
    )
    app = build_app(settings)
    app.consumer.auto_drain = False
    stop = threading.Event()
    _workers(app, stop)
    site = work / "site"
    try:
        console.print(f"[bold]Pressroom demo[/bold] in {work}")
        status = app.submissions.submit(
            brief=brief or DEFAULT_BRIEF,
            corpus=str(SAMPLE_CORPUS),
            destinations=[f"site:{site}"],
            actor="demo",
        )
        saga_id = status["saga_id"]
        console.print(f"saga {saga_id}")
        seen: set[str] = set()
        status = _follow(app, saga_id, {"ready-for-review"} | FINAL, seen)
        if status["state"] != "ready-for-review":
            console.print(f"[red]stopped:[/red] {status['state']}: {status.get('reason')}")
            return 1
        version = _show(app, saga_id)
        name = approve_as or _ask(version)
        if not name:
            console.print(
                "Not approved. To approve later:\n  "
                + _command(work, "approve", saga_id, "--version", str(version["version"]), "--as", "NAME"),
                markup=False,
            )
            return 0
        approval = app.reviews.approve(saga_id, version=version["version"], actor=name)
        console.print(
            f"approved by {name}; approval {approval['approval_id']} expires {approval['expires_at']}"
        )
        status = _follow(app, saga_id, FINAL, seen)
        if status["state"] != "succeeded":
            console.print(f"[red]{status['state']}[/red]: {status.get('reason')}")
            return 1
        receipt = status["destinations"][0]["receipt"]
        console.print(f"[green]published[/green] {receipt['path']}")
        console.print(f"open {site / 'index.html'}", markup=False)
        console.print(
            "trace: " + _command(work, "trace", saga_id, "--spans", str(work / "spans.jsonl")), markup=False
        )
        return 0
    except PressroomError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return exc.exit_code
    finally:
        stop.set()


def _command(work: Path, *args: str) -> str:
    """A command line that works from any folder: the demo's database and key named in full."""
    exe = Path(sys.argv[0]).resolve() if Path(sys.argv[0]).name == "pressroom" else Path("pressroom")
    database = shlex.quote(f"sqlite:///{work / 'pressroom.db'}")
    secret = shlex.quote(str(work / "secret"))
    return f"PRESSROOM_DATABASE_URL={database} PRESSROOM_SECRET_FILE={secret} " + shlex.join(
        [str(exe), *args]
    )


def _ask(version: dict[str, Any]) -> str:
    if not sys.stdin.isatty():
        return ""
    prompt = (
        f"Approve v{version['version']} ({version['version_digest'][:12]}) as (your name, empty to stop): "
    )
    try:
        return input(prompt).strip()
    except EOFError:
        return ""


__all__ = ["run_demo"]

"""Publish latency by destination: the harness's share vs the destination call itself.

    .venv/bin/python bench/publish_latency.py [--n 60]

For each destination kind — `site:` (a folder), `git:` (a repository),
`webhook:` (tests/support/webhook_server.WebhookServer on 127.0.0.1, its own
thread) and `memory:` — on SQLite and on PostgreSQL:

* *harness*: `Harness.call(publish)` of one approved version, each call on
  its own pre-seeded saga (fresh business key, fresh approval, nothing
  replayed). The app's destination opener is wrapped (bench-side) so the
  time spent inside `Destination.publish` is measured within each call; the
  rest (parse, validate, ledger and approval lookups, policy, checkpoint,
  ledger and events, the executor's read of the saga and version rows, the
  step receipt) is the harness's share.
* *bare*: `Destination.publish(key, version)` of the same kind of version
  with a fresh key, called directly (no harness, no database).

Harness and bare calls alternate in blocks of 20. Destinations accumulate
pages/commits as they would in use (unique titles per saga).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ROOT,
    Stats,
    command_line,
    fmt_ms,
    fmt_x,
    git_rev,
    pg_database,
    ratio,
    stamp,
    table,
    write_section,
)

TITLE = "Publish latency by destination"
BLOCK = 20


class TimedDestination:
    """A destination proxy that records how long each `publish` took (bench-side)."""

    def __init__(self, inner: Any, sink: list[float]) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.sink = sink

    def publish(self, key: str, version: Any) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            receipt: dict[str, Any] = self.inner.publish(key, version)
            return receipt
        finally:
            self.sink.append(time.perf_counter() - started)

    def status(self, key: str) -> Any:
        return self.inner.status(key)

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        self.inner.compensate(key, receipt)


def open_for_bench(uri: str) -> Any:
    """The real adapter for `uri`, as the app opens it."""
    from sagas.destinations.registry import open_destination
    from sagas.destinations.webhook_urls import WebhookAllow

    # The bench's webhook listens on loopback, which PRESSROOM_WEBHOOK_ALLOW must name.
    return open_destination(uri, timeout=10.0, webhook_allow=WebhookAllow.parse("127.0.0.1"))


def seed(app: Any, uri: str, count: int, tag: str) -> list[tuple[str, str, str, str]]:
    """`count` approved sagas publishing to `uri`: (saga id, digest, title, markdown)."""
    from datetime import timedelta

    from orchestrator.harness.approvals import ApprovalBinding, mint, session_for
    from orchestrator.harness.digests import text_digest
    from orchestrator.store.db import unit_of_work
    from orchestrator.store.harness_store import approval_row
    from orchestrator.store.tables import SagaRow, VersionRow, utcnow

    now = utcnow()
    rows: list[tuple[str, str, str, str]] = []
    for i in range(count):
        title = f"Bench page {tag} {i}"
        markdown = f"# {title}\n\nThe Millbrook library network opened its first branch in 1901 [1].\n"
        rows.append((uuid.uuid4().hex, text_digest(markdown), title, markdown))
    with unit_of_work(app.engine) as uow:
        s = uow.session
        for sid, _, _, _ in rows:
            s.add(
                SagaRow(
                    id=sid,
                    brief="publish bench",
                    corpus="",
                    destinations=[uri],
                    state="approved",
                    head_version=1,
                    created_by="bench",
                )
            )
        s.flush()
        for sid, digest, title, markdown in rows:
            s.add(
                VersionRow(
                    saga_id=sid, number=1, digest=digest, title=title, author="writer", markdown=markdown
                )
            )
            binding = ApprovalBinding(
                saga_id=sid,
                version=1,
                version_digest=digest,
                destinations=(uri,),
                session=session_for(sid, 1),
                approver="editor",
                expires_at=now + timedelta(hours=2),
            )
            s.add(approval_row(binding, mint(binding, app.signing_key), issued_at=now))
    return rows


def run_database(label: str, url: str, workdir: Path, hook_url: str, n: int) -> list[dict[str, Any]]:
    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings
    from orchestrator.harness.capabilities import ROLE_CAPABILITIES
    from orchestrator.harness.spec import ToolCall, ToolStatus
    from orchestrator.toolpath.engine import Caller
    from sagas.destinations.base import PublishedVersion
    from sagas.destinations.registry import slugify
    from sagas.publishing import PublishArgs, publish_key

    inside: list[float] = []

    def opener(uri: str) -> Any:
        return TimedDestination(open_for_bench(uri), inside)

    app = build_app(
        Settings(
            database_url=url, broker_url="inline://", secret="bench-secret", secret_file=workdir / "secret"
        ),
        open_destination=opener,
    )
    tag = label.lower()
    kinds = {
        "site": f"site:{workdir / f'site-{tag}'}",
        "git": f"git:{workdir / f'repo-{tag}'}",
        "webhook": f"webhook:{hook_url}",
        "memory": f"memory:bench-{tag}",
    }
    warm = 5
    results: list[dict[str, Any]] = []
    try:
        for kind, uri in kinds.items():
            sagas = seed(app, uri, 2 * (n + warm), f"{tag}-{kind}")
            harness_sagas, bare_sagas = sagas[: n + warm], sagas[n + warm :]
            dest = open_for_bench(uri)

            def via_harness(sid: str, digest: str, uri: str = uri) -> tuple[float, float]:
                caller = Caller(actor="publisher", capabilities=ROLE_CAPABILITIES["publisher"], saga_id=sid)
                call = ToolCall(
                    tool="publish",
                    arguments={"saga_id": sid, "destination": uri, "version_digest": digest},
                    call_id=uuid.uuid4().hex,
                )
                before = len(inside)
                started = time.perf_counter()
                result = app.harness.call(call, caller)
                total = time.perf_counter() - started
                assert result.status is ToolStatus.OK, result
                assert len(inside) == before + 1, "one destination call per publish"
                return total, inside[-1]

            def bare(
                sid: str, digest: str, title: str, markdown: str, uri: str = uri, dest: Any = dest
            ) -> float:
                version = PublishedVersion(
                    saga_id=sid,
                    version=1,
                    version_digest=digest,
                    title=title,
                    slug=slugify(title),
                    markdown=markdown,
                )
                key = publish_key(PublishArgs(saga_id=sid, destination=uri, version_digest=digest))
                started = time.perf_counter()
                dest.publish(key, version)
                return time.perf_counter() - started

            for (hs, hd, _, _), bs in zip(harness_sagas[:warm], bare_sagas[:warm], strict=True):
                via_harness(hs, hd)
                bare(*bs)
            totals: list[float] = []
            insides: list[float] = []
            bares: list[float] = []
            h_rest, b_rest = harness_sagas[warm:], bare_sagas[warm:]
            for i in range(0, n, BLOCK):
                for bs in b_rest[i : i + BLOCK]:
                    bares.append(bare(*bs))
                for hs, hd, _, _ in h_rest[i : i + BLOCK]:
                    total, dest_time = via_harness(hs, hd)
                    totals.append(total)
                    insides.append(dest_time)
            results.append(
                {
                    "db": label,
                    "kind": kind,
                    "total": Stats("total", totals),
                    "inside": Stats("inside", insides),
                    "bare": Stats("bare", bares),
                    "outside": Stats("outside", [t - d for t, d in zip(totals, insides, strict=True)]),
                    "share": statistics.median((t - d) / t for t, d in zip(totals, insides, strict=True)),
                }
            )
    finally:
        app.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="publishes per path, destination kind and database")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    opts = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from tests.support.webhook_server import WebhookServer

    workdir = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    load = os.getloadavg()[0]
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    try:
        with WebhookServer() as hook:
            results += run_database("SQLite", f"sqlite:///{workdir / 'bench.db'}", workdir, hook.url, opts.n)
            with pg_database("pressroom_bench_publish") as url:
                results += run_database("PostgreSQL", url, workdir, hook.url, opts.n)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started

    rows = []
    for r in results:
        total, inside, bare, outside = r["total"], r["inside"], r["bare"], r["outside"]
        rows.append(
            [
                r["db"],
                r["kind"],
                total.n,
                fmt_ms(total.median),
                fmt_ms(total.p99),
                fmt_ms(inside.median),
                fmt_ms(outside.median),
                f"{100 * r['share']:.0f} %",
                fmt_ms(bare.median),
                fmt_ms(bare.p99),
                fmt_x(ratio(total.median, bare.median)),
            ]
        )
    out = table(
        [
            "database",
            "destination",
            "n",
            "harness call median ms",
            "p99 ms",
            "inside Destination.publish ms",
            "outside it (harness) ms",
            "harness share (median)",
            "bare Destination.publish ms",
            "bare p99 ms",
            "harness ÷ bare (medians)",
        ],
        rows,
    )
    print(out)
    if opts.no_write:
        return
    body = f"""Command: `{command_line()}` ({stamp()}, code at {git_rev()}; total {seconds:.0f} s; 1-minute load
average {load:.2f} at the start — the machine is shared, other people's test runs may overlap).

Per destination kind and database: *harness call* is `Harness.call(publish)` of one approved version,
each call on its own pre-seeded saga (fresh business key, fresh approval, nothing replayed), tracing off.
The app's destination opener (`build_app(open_destination=…)`) is wrapped so the time inside
`Destination.publish` is measured within each call; *outside it* is the rest of the call (parse,
validate, ledger and approval lookups, policy and HMAC check, the pre-execute transaction with the
checkpoint, the record transaction with ledger, events and the step receipt, and the executor's read of
the saga and version rows); *harness share* is the median over calls of outside ÷ total. *Bare* is
`Destination.publish(key, version)` called directly with a fresh key (no harness, no database).
Destinations: `site:` and `git:` in a temporary folder (pages and commits accumulate over the run,
unique titles), `webhook:` against `tests/support/webhook_server.WebhookServer` (threaded, in this
process, plain `http://` on 127.0.0.1; the adapter opens a new `httpx.Client` per request, with the one
TLS context it builds per process), `memory:` in process. Harness and bare calls alternate in blocks of {BLOCK}; medians and p99 are over n
calls. A `memory:` publish is a dict update (microseconds), so its ratio only says that the harness is
the whole cost there.

{out}
"""
    write_section(TITLE, body)
    print(f"\nwrote section '## {TITLE}' of docs/benchmarks.md")


if __name__ == "__main__":
    main()

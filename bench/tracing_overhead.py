"""Tracing overhead: saga latency (submit → ready-for-review) with tracing off, in memory, and OTLP.

    .venv/bin/python bench/tracing_overhead.py [--n 60] [--block 10]

One saga = `Submissions.submit` on SQLite with the inline broker: research,
writing and review run in this process before `submit` returns the saga in
`ready-for-review` (the sample corpus, a `memory:` destination). Three modes,
side by side in one run, switched between blocks of sagas with
`telemetry.setup.configure_tracing(..., set_global=False, force=True)` (the
telemetry package keeps its own provider reference, see
`telemetry.spans.use_tracer_provider`, so the global provider is never
touched):

* `off`    — no exporter configured (the default): spans go to the API's no-op tracer;
* `disabled` — OTEL_SDK_DISABLED=true: Pressroom installs the API's NoOpTracerProvider;
* `memory` — OTEL_TRACES_EXPORTER=memory (in-memory exporter, SimpleSpanProcessor);
* `otlp`   — OTEL_TRACES_EXPORTER=otlp, OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, to a
  tiny local receiver (`bench/_otlp_receiver.py`, its own process, answers 200)
  through the SDK's BatchSpanProcessor.

Blocks rotate through the modes so slow phases of the shared machine hit all
modes alike. The batch processor exports in its background thread while a
block runs (that work is in the measured latency); at a switch it is flushed
and shut down outside the timing (reported separately).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
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
    ratio,
    stamp,
    table,
    write_section,
)

TITLE = "Tracing overhead"
BRIEF = "Write a short history of the Millbrook public library network, its branches and the bookmobile."
MODES = ("off", "disabled", "memory", "otlp")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="sagas per mode")
    parser.add_argument("--block", type=int, default=10, help="sagas per block before switching mode")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    opts = parser.parse_args()

    import roles
    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings
    from telemetry import setup

    receiver = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "_otlp_receiver.py")],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    load = os.getloadavg()[0]
    started = time.monotonic()
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline().strip())
        # The OTLP/HTTP exporter reads its endpoint from the environment itself.
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{port}/v1/traces"
        envs: dict[str, dict[str, str]] = {
            "off": {},
            "disabled": {"OTEL_SDK_DISABLED": "true"},
            "memory": {"OTEL_TRACES_EXPORTER": "memory"},
            "otlp": {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
        }
        app = build_app(
            Settings(
                database_url=f"sqlite:///{workdir / 'bench.db'}",
                broker_url="inline://",
                secret="bench-secret",
                secret_file=workdir / "secret",
            ),
            memory_destinations=True,
        )
        corpus = str(Path(roles.__file__).parent / "sample_corpus")

        def saga() -> float:
            t = time.perf_counter()
            status = app.submissions.submit(
                brief=BRIEF, corpus=corpus, destinations=["memory:trace-bench"], actor="dana"
            )
            elapsed = time.perf_counter() - t
            assert status["state"] == "ready-for-review", status
            return elapsed

        samples: dict[str, list[float]] = {m: [] for m in MODES}
        switch: dict[str, list[float]] = {m: [] for m in MODES}
        memory_spans = 0
        memory_sagas = 0

        def use(mode: str) -> None:
            t = time.perf_counter()
            setup.configure_tracing("pressroom-bench", env=envs[mode], set_global=False, force=True)
            switch[mode].append(time.perf_counter() - t)

        for mode in MODES:  # warm-up: imports, exporter set-up, first connections
            use(mode)
            saga()
            saga()
        rounds = -(-opts.n // opts.block)
        for r in range(rounds):
            order = MODES[r % len(MODES) :] + MODES[: r % len(MODES)]
            for mode in order:
                use(mode)
                exporter = setup.memory_exporter()
                if exporter is not None:
                    exporter.clear()
                count = min(opts.block, opts.n - len(samples[mode]))
                for _ in range(count):
                    samples[mode].append(saga())
                exporter = setup.memory_exporter()
                if mode == "memory" and exporter is not None:
                    memory_spans += len(exporter.get_finished_spans())
                    memory_sagas += count
        t = time.perf_counter()
        setup.shutdown()  # flushes the last OTLP batch
        final_flush = time.perf_counter() - t
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=30) as resp:
            received: dict[str, Any] = json.loads(resp.read())
        app.close()
    finally:
        receiver.terminate()  # the receiver process this bench started
        receiver.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started

    off = Stats("off", samples["off"])
    labels = {
        "off": "off (no exporter configured: no-op tracer)",
        "disabled": "off (OTEL_SDK_DISABLED=true: NoOpTracerProvider)",
        "memory": "in-memory exporter (SimpleSpanProcessor)",
        "otlp": "OTLP http/protobuf to a local receiver (BatchSpanProcessor)",
    }
    rows = []
    for mode in MODES:
        st = Stats(mode, samples[mode])
        rows.append(
            [
                labels[mode],
                st.n,
                fmt_ms(st.median),
                fmt_ms(st.p99),
                fmt_x(ratio(st.median, off.median)),
                fmt_x(ratio(st.p99, off.p99)),
            ]
        )
    out = table(["tracing", "sagas", "median ms", "p99 ms", "median ratio", "p99 ratio"], rows)
    spans_per_saga = memory_spans / memory_sagas if memory_sagas else float("nan")
    switch_otlp = Stats("switch", switch["otlp"])
    notes = (
        f"Spans per saga (counted by the in-memory exporter): {spans_per_saga:.0f}. The OTLP receiver got "
        f"{received['requests']} export requests, {received['spans']} spans, {received['bytes'] / 1024:.0f} KiB "
        f"(warm-up sagas included). Switching into OTLP mode took {fmt_ms(switch_otlp.median)} ms (median; it "
        f"flushes and shuts down the previous provider); the final flush {fmt_ms(final_flush)} ms — both "
        "outside the saga timings."
    )
    print(out)
    print()
    print(notes)
    if opts.no_write:
        return
    body = f"""Command: `{command_line()}` ({stamp()}, code at {git_rev()}; total {seconds:.0f} s; 1-minute load
average {load:.2f} at the start — the machine is shared, other people's test runs may overlap).

One saga is `Submissions.submit` on SQLite (a file in a temporary folder) with the `inline://` broker:
research, writing and review run in this process and `submit` returns the saga in `ready-for-review`
(sample corpus, one `memory:` destination). The modes are switched between blocks of {opts.block} sagas
with `telemetry.setup.configure_tracing(…, env=…, set_global=False, force=True)` (Pressroom keeps its own
provider reference, `telemetry.spans.use_tracer_provider`; the global provider is never set), rotating
the order every round so the shared machine's slow phases hit every mode alike; two warm-up sagas per
mode first. *off*: no exporter configured (the default), spans go to the API's no-op tracer;
`OTEL_SDK_DISABLED=true` installs the API's `NoOpTracerProvider` (shown as a second "off"). *in
memory*: `OTEL_TRACES_EXPORTER=memory`. *OTLP*: `OTEL_TRACES_EXPORTER=otlp`,
`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`, endpoint a tiny receiver on 127.0.0.1
(`bench/_otlp_receiver.py`, stdlib `http.server` in its own process, answers 200); the batch processor
exports in its background thread during a block (inside the timings) and is flushed at each switch
(outside them). Ratios are against *off*.

{out}

{notes}
"""
    write_section(TITLE, body)
    print(f"\nwrote section '## {TITLE}' of docs/benchmarks.md")


if __name__ == "__main__":
    main()

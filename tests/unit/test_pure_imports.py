"""Pure modules load no database, broker, HTTP or OpenTelemetry SDK module."""

from __future__ import annotations

import subprocess
import sys

PURE = [
    "sagas.machine",
    "sagas.reducer",
    "sagas.step_states",
    "orchestrator.core.errors",
    "orchestrator.core.clock",
    "orchestrator.harness.spec",
    "orchestrator.harness.registry",
    "orchestrator.harness.parse",
    "orchestrator.harness.capabilities",
    "orchestrator.harness.policy",
    "orchestrator.harness.approvals",
    "orchestrator.harness.handles",
    "orchestrator.harness.checkpoints",
    "orchestrator.harness.provenance",
    "orchestrator.harness.digests",
    "orchestrator.harness.event_chain",
    "orchestrator.harness.ledger_status",
    "orchestrator.harness.textfold",
    "orchestrator.harness.principals",
    "orchestrator.harness.mcp_tools",
    "orchestrator.core.routing",
    "roles.artifacts",
    "roles.injection",
    "roles.sentences",
    "roles.floor_checks",
    "roles.judgments",
    "orchestrator.entrypoints.outcome",
    "roles.injection_rules",
    "roles.regex_gate",
    "orchestrator.harness.links",
    "orchestrator.reads.read_shapes",
    "orchestrator.reads.pipeline_shapes",
    "orchestrator.reads.read_model",
    "orchestrator.light_config",
    "roles.revising",
    "sagas.destinations.webhook_urls",
    "sagas.destinations.site_names",
    "orchestrator.core.host_lists",
    "orchestrator.findings",
    "orchestrator.quoted",
    "orchestrator.comment_notes",
    "orchestrator.saga_log",
    "orchestrator.entrypoints.web.actions",
]
FORBIDDEN = [
    "sqlalchemy",
    "sqlmodel",
    "psycopg",
    "celery",
    "kombu",
    "redis",
    "httpx",
    "opentelemetry.sdk",
    "sqlite3",
]


def test_pure_modules_import_no_adapters() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in PURE)
        + f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} or m.startswith('opentelemetry.sdk'))\n"
        + "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"pure modules loaded: {done.stdout.strip()}"


def test_the_checker_would_see_a_forbidden_import() -> None:
    code = "import sys, sqlite3\nprint('sqlite3' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"

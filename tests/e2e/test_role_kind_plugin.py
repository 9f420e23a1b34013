"""A role kind from another package: one module and one entry point, nothing else.

The module (written here, on the console script's PYTHONPATH with the
metadata of a distribution that declares it under `pressroom.role_kinds`)
registers a `factcheck` reviewer kind on the reviewer queue. A pipeline in
PRESSROOM_PIPELINES_DIR runs it in parallel with the built-in reviewer: its
`fail` sends the draft back for a revision round, and `show` holds both
reviewers' verdicts.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.conftest import Cli, base_env

PLUGIN = '''
"""A factcheck reviewer: requests changes for every citation whose quote says "bookmobile"."""

import uuid

from sqlmodel import Session

from orchestrator.harness.spec import ToolCall
from roles.artifacts import Finding, ReviewReport
from roles.kinds import RoleKind, register
from roles.rounds import Outcome
from roles.tools import store_artifact
from roles.turn import Turned, run_planner
from sagas import records

WORD = "bookmobile"


class ReadOnce:
    def __init__(self, saga_id, source):
        self.arguments = {"saga_id": saga_id, "source": source}

    def propose(self, transcript):
        if transcript:
            return None
        return ToolCall(tool="corpus.read", arguments=self.arguments, call_id=uuid.uuid4().hex)


def turn(ctx):
    with Session(ctx.ports.engine) as s:
        version = records.version(s, ctx.saga_id, ctx.handoff.version)
    loop = run_planner(ctx, ReadOnce(ctx.saga_id, version.citations[0]["source"]))
    if failed := loop.failed("factcheck"):
        return failed
    findings = tuple(
        Finding(rule="quote-not-verbatim", location=f"citation {c['marker']}", message=f"says {WORD}")
        for c in version.citations
        if WORD in c["quote"]
    )
    report = ReviewReport(
        verdict="changes_requested" if findings else "pass",
        findings=findings,
        checked_citations=len(version.citations),
        version_digest=version.digest,
    )

    def write(s, saga):
        return Outcome.done(store_artifact(s, saga.id, "review", report), "fail" if findings else "pass")

    return loop.then(write)


register(RoleKind("factcheck", "reviewer", "pressroom.reviewer.factcheck", "verdict", frozenset({"corpus.read"}), turn))
'''

PIPELINE = """
[[role]]
name = "research"
kind = "researcher"

[[role]]
name = "draft"
kind = "writer"
after = ["research"]

[[role]]
name = "sources"
kind = "reviewer"
after = ["draft"]

[[role]]
name = "facts"
kind = "factcheck"
after = ["draft"]
"""


def plugin_path(tmp_path: Path) -> Path:
    """A folder holding the module and the metadata of a distribution that declares it."""
    folder = tmp_path / "plugin"
    info = folder / "factcheck_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (folder / "factcheck_plugin.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: factcheck-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pressroom.role_kinds]\nfactcheck = factcheck_plugin\n")
    return folder


def test_a_kind_from_an_entry_point_runs_beside_the_builtin_reviewer(
    tmp_path: Path, sqlite_url: str, corpus: Path
) -> None:
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "factchecked.toml").write_text(PIPELINE, encoding="utf-8")
    cli = Cli(
        base_env(
            PRESSROOM_DATABASE_URL=sqlite_url,
            PRESSROOM_BROKER_URL="inline://",
            PRESSROOM_PIPELINES_DIR=str(pipelines),
            PYTHONPATH=str(plugin_path(tmp_path)),
        ),
        tmp_path,
    )
    done = cli.json(
        "submit", "--brief", "history of the library network", "--corpus", str(corpus),
        "--dest", f"site:{tmp_path / 'site'}", "--as", "dana", "--pipeline", "factchecked",
    )  # fmt: skip
    # The factcheck failed the first draft; the writer dropped the quote; both reviewers passed the second.
    assert done["state"] == "ready-for-review" and done["version"] == 2, done
    first = cli.run("show", done["saga_id"], "--version", "1", "--json")
    assert first.returncode == 0, first.stderr
    review = json.loads(first.stdout)["review"]
    assert review["verdict"] == "changes_requested"
    assert {role: r["verdict"] for role, r in review["reviewers"].items()} == {
        "sources": "pass",
        "facts": "changes_requested",
    }
    assert "bookmobile" not in cli.json("show", done["saga_id"])["markdown"]

"""Pipelines through the console script: `pipelines list` / `show`, `submit --pipeline`, and
the pipeline fields of `status` on PostgreSQL's quick and full paths.

The pipelines are files in a tmp `PRESSROOM_PIPELINES_DIR` (`tests/support/pipelines.py`):
two good ones beside four that must each be refused with one line naming the file and
the field. Each check costs a process start, so the checks are batched into few tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PRESSROOM, SAMPLE_CORPUS, Cli, base_env
from tests.support.pipelines import BAD, PAIR, ROUND, SEEDED_USAGE, seed_progress, write_pipelines

pytestmark = pytest.mark.timeout(600)
SECRET_KEY = "sk-house-0123456789-never-printed"


def _cli(tmp_path: Path, **extra: str) -> Cli:
    folder = write_pipelines(tmp_path / "pipelines")
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
        PRESSROOM_BROKER_URL="inline://",
        PRESSROOM_PIPELINES_DIR=str(folder),
        HOUSE_API_KEY=SECRET_KEY,
        **extra,
    )
    return Cli(env, tmp_path)


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_list_and_show_give_the_good_pipelines_and_name_each_bad_file(tmp_path: Path) -> None:
    cli = _cli(tmp_path)
    folder = tmp_path / "pipelines"

    listed = cli.run("pipelines", "list", "--json")
    assert listed.returncode == 2, listed.stderr  # a bad file beside them: CI notices
    out = json.loads(listed.stdout)  # still one JSON object with every good pipeline
    assert [p["name"] for p in out["pipelines"]] == ["default", "house", "pair"]
    pair = next(p for p in out["pipelines"] if p["name"] == "pair")
    assert pair["roles"] == ["research", "draft", "fact-check", "style"]
    assert pair["file"] == str(folder / "pair.toml") and pair["description"]
    assert sorted(bad["name"] for bad in out["invalid"]) == sorted(BAD)
    said = listed.stderr.splitlines()
    assert len(said) == len(BAD), listed.stderr  # one line per bad file, naming the file and the field
    for name, (_text, field) in BAD.items():
        (line,) = [s for s in said if f"{folder / name}.toml: " in s]
        assert line.startswith("error: ") and field in line, line

    human = cli.run("pipelines", "list")
    assert human.returncode == 2 and len(human.stderr.splitlines()) == len(BAD)
    assert "pair  research → draft → fact-check → style  research, a draft" in human.stdout
    assert "badkind" not in human.stdout

    shown = cli.run("pipelines", "show", "house", "--json")
    assert shown.returncode == 0, shown.stderr
    house = json.loads(shown.stdout)
    assert [(r["name"], r["kind"], r["after"], r["planner"], r["model"]) for r in house["roles"]] == [
        ("research", "researcher", [], "deterministic", None),
        ("draft", "writer", ["research"], "house", "house-model"),
        ("style", "reviewer", ["draft"], "house", "house-model"),
    ]
    assert house["roles"][1]["budget"] == {"tokens": 40000}
    assert house["roles"][0]["tools"] == ["mcp:archive/search"] and house["mcp"] == ["archive"]
    assert house["models"] == [{"name": "house", "model": "house-model", "base_url": "http://127.0.0.1:9/v1"}]
    assert house["budget"] == {"cost_usd": 2.5}
    for secret in (SECRET_KEY, "hunter2", "leaked"):
        assert secret not in shown.stdout

    table = cli.run("pipelines", "show", "house")
    assert table.returncode == 0, table.stderr
    assert (
        "draft  writer  after research  planner house  model house-model  budget 40,000 tokens"
        in table.stdout
    )
    assert "model profile house: house-model at http://127.0.0.1:9/v1" in table.stdout
    assert SECRET_KEY not in table.stdout and "hunter2" not in table.stdout

    bad = cli.run("pipelines", "show", "badafter")
    assert bad.returncode == 2
    assert f"{folder / 'badafter.toml'}: role[1].after: 'nobody'" in _one_error_line(bad)
    missing = cli.run("pipelines", "show", "nope")
    assert missing.returncode == 3 and "no pipeline 'nope'" in _one_error_line(missing)
    climbing = cli.run("pipelines", "show", "../pair")
    assert climbing.returncode == 2 and "not a pipeline name" in _one_error_line(climbing)


def test_submit_runs_the_named_pipeline_and_refuses_unknown_and_bad_ones(tmp_path: Path) -> None:
    cli = _cli(tmp_path)
    base = ["submit", "--brief", "the library network", "--corpus", str(SAMPLE_CORPUS)]
    base += ["--dest", f"site:{tmp_path / 'site'}", "--as", "sam", "--request-id", "r-1"]

    made = cli.json(*base, "--pipeline", "pair")
    assert made["pipeline"] == "pair" and made["state"] == "ready-for-review", made
    assert [(r["name"], r["kind"]) for r in made["roles"]] == [
        ("research", "researcher"),
        ("draft", "writer"),
        ("fact-check", "reviewer"),
        ("style", "reviewer"),
    ]
    # Each role ran once; both reviewers passed the draft.
    assert [(r["state"], r["round"], r["verdict"]) for r in made["roles"]] == [
        ("done", 1, None),
        ("done", 1, None),
        ("done", 1, "pass"),
        ("done", 1, "pass"),
    ]
    # The saga runs the copy stored at submit, whatever happens to the file afterwards.
    (tmp_path / "pipelines" / "pair.toml").write_text(PAIR.split('[[role]]\nname = "style"')[0])
    again = cli.json(*base, "--pipeline", "pair")  # the same request: the same saga
    assert again["replayed"] and again["saga_id"] == made["saga_id"]
    assert [r["name"] for r in again["roles"]] == ["research", "draft", "fact-check", "style"]
    assert again["pipeline_digest"] == made["pipeline_digest"]

    other = cli.run(*base)  # the same request id, another pipeline (the default): not the same request
    assert other.returncode == 4 and "was used for a different submit" in _one_error_line(other)
    unknown = cli.run(*base[:-2], "--pipeline", "nope")
    assert unknown.returncode == 3 and "no pipeline 'nope'" in _one_error_line(unknown)
    climbing = cli.run(*base[:-2], "--pipeline", "../../etc/passwd")
    assert climbing.returncode == 2 and "not a pipeline name" in _one_error_line(climbing)
    broken = cli.run(*base[:-2], "--pipeline", "badplanner")
    assert broken.returncode == 2
    assert f"{tmp_path / 'pipelines' / 'badplanner.toml'}: role[0].planner" in _one_error_line(broken)

    import sqlite3

    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        assert conn.execute("SELECT count(*), max(pipeline) FROM sagas").fetchall() == [(1, "pair")]
        kind, body = conn.execute(
            "SELECT kind, body FROM artifacts WHERE digest = ?", (made["pipeline_digest"],)
        ).fetchone()
    assert kind == "pipeline" and json.loads(body)["name"] == "pair"
    assert [r["name"] for r in json.loads(body)["role"]] == ["research", "draft", "fact-check", "style"]


def _run(env: dict[str, str], tmp_path: Path, *args: str, timing: bool = False) -> Any:
    head = [sys.executable, "-X", "importtime"] if timing else []
    return subprocess.run(
        [*head, PRESSROOM, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )


def test_status_and_show_hold_the_pipeline_roles_and_usage_on_postgres(tmp_path: Path, pg_url: str) -> None:
    """PostgreSQL: the quick reader (psycopg alone) and the full path give the same bytes."""
    env = base_env(PRESSROOM_DATABASE_URL=pg_url, PRESSROOM_BROKER_URL="inline://")
    full = {**env, "PRESSROOM_MAX_ATTEMPTS": "5"}  # a setting only Settings() judges: the full path
    made = _run(env, tmp_path, "submit", "--brief", "the library network", "--corpus", str(SAMPLE_CORPUS),
                "--dest", f"site:{tmp_path / 'site'}", "--as", "sam", "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    saga_id = json.loads(made.stdout)["saga_id"]
    import psycopg

    with psycopg.connect(pg_url.replace("postgresql+psycopg", "postgresql")) as conn:
        seed_progress(conn, saga_id, "%s")

    quick = _run(env, tmp_path, "status", saga_id, "--json", timing=True)
    loaded = {line.rsplit("|", 1)[1].strip() for line in quick.stderr.splitlines() if "|" in line}
    assert "orchestrator.reads.pg_reads" in loaded and "sqlalchemy" not in loaded  # it did not fall back
    slow = _run(full, tmp_path, "status", saga_id, "--json")
    assert (quick.returncode, quick.stdout) == (slow.returncode, slow.stdout) == (0, slow.stdout)
    out = json.loads(quick.stdout)
    assert out["pipeline"] == "default" and out["pipeline_digest"] and out["usage"] == SEEDED_USAGE
    reviewer = out["roles"][-1]
    assert (reviewer["name"], reviewer["state"], reviewer["verdict"], reviewer["round"]) == (
        "reviewer",
        "failed",
        "fail",
        ROUND,
    )
    assert reviewer["reason"].startswith("budget exhausted")
    shown = [_run(e, tmp_path, "show", saga_id, "--json") for e in (env, full)]
    assert shown[0].stdout == shown[1].stdout and shown[0].returncode == 0
    assert json.loads(shown[0].stdout)["roles"] == out["roles"]

"""Pipeline files for the tests of the pipeline surfaces: two good ones and four bad ones.

`write_pipelines(folder)` writes them into `folder` (a `PRESSROOM_PIPELINES_DIR`):

* `pair`: research, a draft, then two reviewers after the draft (run in
  parallel, both must pass); deterministic planners, so a submit runs it
  without a model;
* `house`: roles on a model profile, with budgets and an MCP tool; shown,
  never submitted. Its endpoint carries a user, a password and a query that
  `pipelines show` must not print;
* `badkind`, `badafter`, `badplanner`, `badtoml`: each refused with one line
  naming the file and the field (`BAD`: the field each line must name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PAIR = """\
description = "research, a draft, then two reviewers in parallel"

[[role]]
name = "research"
kind = "researcher"

[[role]]
name = "draft"
kind = "writer"
after = ["research"]

[[role]]
name = "fact-check"
kind = "reviewer"
after = ["draft"]

[[role]]
name = "style"
kind = "reviewer"
after = ["draft"]
"""

HOUSE = """\
description = "a writer and a reviewer on the house model"
budget = { cost_usd = 2.5 }

[[role]]
name = "research"
kind = "researcher"
tools = ["mcp:archive/search"]

[[role]]
name = "draft"
kind = "writer"
after = ["research"]
planner = "house"
budget = { tokens = 40000 }

[[role]]
name = "style"
kind = "reviewer"
after = ["draft"]
planner = "house"

[model.house]
base_url = "http://editor:hunter2@127.0.0.1:9/v1?token=leaked"
model = "house-model"
api_key_env = "HOUSE_API_KEY"

[mcp.archive]
command = ["archive-mcp", "--stdio"]
risk = { search = "read_only" }
"""

BAD = {
    "badkind": (
        '[[role]]\nname = "research"\nkind = "researcher"\n\n'
        '[[role]]\nname = "draft"\nkind = "editor"\nafter = ["research"]\n',
        "role[1].kind",
    ),
    "badafter": (
        '[[role]]\nname = "research"\nkind = "researcher"\n\n'
        '[[role]]\nname = "draft"\nkind = "writer"\nafter = ["nobody"]\n',
        "role[1].after",
    ),
    "badplanner": (
        '[[role]]\nname = "research"\nkind = "researcher"\nplanner = "house"\n\n'
        '[[role]]\nname = "draft"\nkind = "writer"\nafter = ["research"]\n',
        "role[0].planner",
    ),
    "badtoml": ('[[role]\nname = "research"\n', "not TOML"),
}


def write_pipelines(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pair.toml").write_text(PAIR, encoding="utf-8")
    (folder / "house.toml").write_text(HOUSE, encoding="utf-8")
    for name, (text, _field) in BAD.items():
        (folder / f"{name}.toml").write_text(text, encoding="utf-8")
    return folder


# Rows a preparation round and model calls would leave (written straight into the tables, so the
# read paths are checked on known values whatever the roles did): round 9 is later than any round
# a submit ran, so these are the roles' latest runs.
ROUND = 9
RUNS = (
    ("researcher", "done", None, None),
    ("writer", "done", None, None),
    ("reviewer", "failed", "fail", "budget exhausted: 41,200 of 40,000 tokens spent by role reviewer"),
)
CALLS = (  # role, tokens in, tokens out, cost, state: only answered calls count
    ("writer", 1000, 250, 0.125, "answered"),
    ("writer", 500, 50, 0.0625, "answered"),
    ("reviewer", 300, 20, 0.01, "answered"),
    ("reviewer", 999, 999, 9.0, "failed"),
)
SEEDED_USAGE = {"model_calls": 3, "tokens_in": 1800, "tokens_out": 320, "cost_usd": 0.1975}


def seed_progress(conn: Any, saga_id: str, mark: str = "?") -> None:
    """Insert `RUNS` (round `ROUND`) and `CALLS` for `saga_id` through a DB-API connection whose
    placeholder is `mark` (`?` for sqlite3, `%s` for psycopg)."""
    now = "2026-01-01 00:00:00.000000"
    for role, state, verdict, reason in RUNS:
        conn.execute(
            "INSERT INTO role_runs (saga_id, round, role, state, verdict, reason, updated_at) "
            f"VALUES ({', '.join([mark] * 7)})",
            (saga_id, ROUND, role, state, verdict, reason, now),
        )
    for seq, (role, t_in, t_out, cost, state) in enumerate(CALLS, start=1001):
        conn.execute(
            "INSERT INTO model_calls (key, saga_id, role, round, seq, profile, model, params, "
            "request_digest, state, tokens_in, tokens_out, cost_usd, attempts, created_at) "
            f"VALUES ({', '.join([mark] * 15)})",
            (f"k-{saga_id}-{seq}", saga_id, role, ROUND, seq, "house", "house-model", "{}", "d" * 64,
             state, t_in, t_out, cost, 1, now),
        )  # fmt: skip


__all__ = [
    "BAD",
    "CALLS",
    "HOUSE",
    "PAIR",
    "ROUND",
    "RUNS",
    "SEEDED_USAGE",
    "seed_progress",
    "write_pipelines",
]

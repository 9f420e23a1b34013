"""`pressroom audit verify` through the console script, on SQLite and PostgreSQL, as an
attacker with SQL access would meet it: one edited event, checkpoint or saga row is a
mismatch (exit 4, the first problem named); undoing the edit makes the saga clean again."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, base_env
from tests.support import in_process


class Sql:
    """Raw SQL on the saga's database, `%s` placeholders on both backends."""

    def __init__(self, url: str) -> None:
        self.sqlite = url.startswith("sqlite")
        if self.sqlite:
            self.conn: Any = sqlite3.connect(url.split("///", 1)[1], isolation_level=None)
        else:
            import psycopg

            self.conn = psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True)

    def run(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.sqlite:
            sql = sql.replace("%s", "?")
        cur = self.conn.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []

    def one(self, sql: str, *params: Any) -> Any:
        return self.run(sql, *params)[0][0]


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, sqlite_url: str) -> Iterator[tuple[Cli, Sql]]:
    url = sqlite_url if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))
    tmp: Path = request.getfixturevalue("tmp_path")
    cli = Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp)
    sql = Sql(url)
    yield cli, sql
    sql.conn.close()


def published(cli: Cli, corpus: Path, tmp_path: Path) -> str:
    """A saga submitted by dana and approved by erin, published: made in this process on the
    console script's database (the audit is what goes through the console script)."""
    dests = [f"site:{tmp_path / 'site'}"]
    brief = "history of the library network"
    sid = in_process.submit(cli.env, cli.cwd, brief=brief, corpus=corpus, destinations=dests, actor="dana")
    approved = in_process.approve(cli.env, cli.cwd, sid, version=1, actor="erin")
    assert (approved["version"], approved["state"]) == (1, "succeeded"), approved
    return sid


def verify(cli: Cli, sid: str) -> tuple[int, dict[str, Any], str]:
    done = cli.run("audit", "verify", sid, "--json")
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_clean_saga_and_three_edits(db: tuple[Cli, Sql], corpus: Path, tmp_path: Path) -> None:
    cli, sql = db
    sid = published(cli, corpus, tmp_path)
    code, report, _ = verify(cli, sid)
    assert code == 0, report["problems"]
    assert report["ok"] and report["problems"] == []
    assert report["events"]["ok"] and report["events"]["count"] > 10
    assert report["checkpoints"]["ok"] and report["checkpoints"]["count"] >= 1
    assert report["state"]["ok"] and report["state"]["derived"] == report["state"]["stored"]
    assert report["state"]["derived"]["state"] == "succeeded"
    human = cli.run("audit", "verify", sid)
    assert human.returncode == 0 and f"{sid}  ok" in human.stdout

    # One event: who approved, rewritten.
    seq, actor = sql.run(
        "SELECT seq, actor FROM events WHERE saga_id = %s AND kind = 'transition' AND status = 'approved'",
        sid,
    )[0]
    sql.run("UPDATE events SET actor = 'mallory' WHERE seq = %s", seq)
    code, report, err = verify(cli, sid)
    assert code == 4 and not report["ok"] and not report["events"]["ok"]
    assert report["checkpoints"]["ok"] and report["state"]["ok"]
    assert (
        report["problems"][0]
        == f"event chain: event {seq} (transition approved): its hash does not match its fields"
    )
    assert err.count("\n") == 1 and err.startswith("error: ") and f"event {seq}" in err
    sql.run("UPDATE events SET actor = %s WHERE seq = %s", actor, seq)
    assert verify(cli, sid)[0] == 0

    # One checkpoint: the state it recorded before the side effect.
    cseq, state = sql.run("SELECT seq, state FROM checkpoints WHERE saga_id = %s ORDER BY seq LIMIT 1", sid)[
        0
    ]
    original = state if isinstance(state, str) else json.dumps(state)
    edited = json.dumps({**json.loads(original), "args_digest": "0" * 64})
    cast = "" if sql.sqlite else "::json"
    sql.run(f"UPDATE checkpoints SET state = %s{cast} WHERE seq = %s", edited, cseq)
    code, report, err = verify(cli, sid)
    assert code == 4 and not report["checkpoints"]["ok"] and report["events"]["ok"] and report["state"]["ok"]
    assert report["problems"] == [f"checkpoint chain: checkpoint {cseq}: its hash or link does not match"]
    sql.run(f"UPDATE checkpoints SET state = %s{cast} WHERE seq = %s", original, cseq)
    assert verify(cli, sid)[0] == 0

    # One saga row: a succeeded saga made to look failed.
    sql.run("UPDATE sagas SET state = 'failed' WHERE id = %s", sid)
    code, report, err = verify(cli, sid)
    assert code == 4 and not report["state"]["ok"] and report["events"]["ok"] and report["checkpoints"]["ok"]
    assert report["problems"] == ["state: stored failed, events give succeeded"]
    assert (
        report["state"]["stored"]["state"] == "failed" and report["state"]["derived"]["state"] == "succeeded"
    )
    assert "state: stored failed, events give succeeded" in err
    sql.run("UPDATE sagas SET state = 'succeeded' WHERE id = %s", sid)
    assert verify(cli, sid)[0] == 0


def test_removed_event_and_step_edit(db: tuple[Cli, Sql], corpus: Path, tmp_path: Path) -> None:
    cli, sql = db
    sid = published(cli, corpus, tmp_path)
    sql.run("UPDATE steps SET state = 'pending' WHERE saga_id = %s", sid)
    code, report, _ = verify(cli, sid)
    assert code == 4 and report["problems"][0].startswith(f"step site:{tmp_path / 'site'}: stored pending")
    sql.run("UPDATE steps SET state = 'done' WHERE saga_id = %s", sid)
    last = sql.one("SELECT max(seq) FROM events WHERE saga_id = %s AND kind = 'transition'", sid)
    sql.run("DELETE FROM events WHERE seq = %s", last)
    code, report, _ = verify(cli, sid)
    assert code == 4 and not report["events"]["ok"] and not report["state"]["ok"]
    assert "its prev_hash does not name the event before it" in report["problems"][0]
    assert "state: stored succeeded, events give executing" in report["problems"]


def test_unknown_saga_and_bad_input(cli: Cli) -> None:
    done = cli.run("audit", "verify", "no-such-saga", "--json")
    assert done.returncode == 3 and done.stdout == "" and done.stderr.startswith("error: no saga")
    done = cli.run("audit", "verify")
    assert done.returncode == 2 and "Traceback" not in done.stderr

"""The keyed event chain and audit checkpoints through the console script, on SQLite and
PostgreSQL, as an attacker with SQL access but without `PRESSROOM_SECRET` would try it:

- rewrite who approved, and re-link every later event (plain SHA-256, or HMAC under a
  guessed key): `audit verify` exits 4; only the real key re-links it (which shows the
  re-linking itself is right, and that the key is what protects the chain);
- sagas written before keyed links (plain links up to the signed cutover) still verify;
  raising the cutover to pass rewritten events off as old ones breaks its signature;
- with a checkpoint from `audit export`, a truncated or rewritten history before it fails
  `audit verify --against` (exit 4), even where plain links let the chain itself pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, select

from orchestrator.harness.event_chain import CHAIN_FIELDS, chain_key, event_hash, keyed_event_hash
from orchestrator.store.db import make_engine
from orchestrator.store.tables import EventRow
from tests.conftest import Cli
from tests.e2e.test_audit import Sql, db, published, verify

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]
__all__ = ["db"]  # the fixture, shared with test_audit

REAL_KEY = chain_key(b"test-signing-key")  # what `base_env` sets as PRESSROOM_SECRET
Link = Callable[[str, Mapping[str, Any]], str]


def relink(cli: Cli, saga_id: str, link: Link, *, edit: tuple[int, str, str] | None = None) -> None:
    """Edit one event's column (seq, column, value), then recompute every link of the saga
    with `link`, as a forger with write access to the database does."""
    engine = make_engine(cli.env["PRESSROOM_DATABASE_URL"], upgrade=False)
    try:
        with Session(engine) as s:
            rows = list(
                s.exec(select(EventRow).where(EventRow.saga_id == saga_id).order_by(col(EventRow.seq)))
            )
            prev = rows[0].prev_hash
            for row in rows:
                if edit is not None and row.seq == edit[0]:
                    setattr(row, edit[1], edit[2])
                row.prev_hash = prev
                row.hash = link(prev, {n: getattr(row, n) for n in CHAIN_FIELDS})
                prev = row.hash
                s.add(row)
                s.flush()
            s.commit()
    finally:
        engine.dispose()


def remove_saga(sql: Sql, sid: str) -> None:
    """Delete the saga and every row naming it, in whatever order its foreign keys allow."""
    if sql.sqlite:
        tables = [r[0] for r in sql.run("SELECT name FROM sqlite_master WHERE type = 'table'")]
        tables = [t for t in tables if any(c[1] == "saga_id" for c in sql.run(f"PRAGMA table_info({t})"))]
    else:
        tables = [
            r[0]
            for r in sql.run(
                "SELECT table_name FROM information_schema.columns "
                "WHERE column_name = 'saga_id' AND table_schema = current_schema()"
            )
        ]
    pending = [*tables, "sagas"]
    for _ in range(len(pending) + 1):
        left = []
        for table in pending:
            column = "id" if table == "sagas" else "saga_id"
            try:
                sql.run(f"DELETE FROM {table} WHERE {column} = %s", sid)
            except Exception:  # a row of another table still refers to it: next pass
                left.append(table)
        pending = left
    assert not pending, pending


def approval_event(sql: Sql, sid: str) -> tuple[int, str]:
    seq, actor = sql.run(
        "SELECT seq, actor FROM events WHERE saga_id = %s AND kind = 'transition' AND status = 'approved'",
        sid,
    )[0]
    return int(seq), str(actor)


def test_a_rewritten_approver_relinked_without_the_key_fails_the_audit(
    db: tuple[Cli, Sql], corpus: Path, tmp_path: Path
) -> None:
    cli, sql = db
    sid = published(cli, corpus, tmp_path)
    assert verify(cli, sid)[0] == 0
    seq, actor = approval_event(sql, sid)

    relink(cli, sid, event_hash, edit=(seq, "actor", "mallory"))  # plain SHA-256, as before keyed links
    assert sql.one("SELECT actor FROM events WHERE seq = %s", seq) == "mallory"
    code, report, err = verify(cli, sid)
    assert code == 4 and not report["events"]["ok"] and report["events"]["plain"] == 0
    assert report["problems"][0].startswith("event chain: event ")
    assert err.startswith("error: ") and err.count("\n") == 1

    wrong = chain_key(b"a guessed secret")
    relink(cli, sid, lambda prev, fields: keyed_event_hash(wrong, prev, fields))
    code, report, _ = verify(cli, sid)
    assert code == 4 and report["problems"][0].startswith("event chain: event ")

    # The holder of the key can re-link it: the forger's re-linking is right, the key is missing.
    relink(cli, sid, lambda prev, fields: keyed_event_hash(REAL_KEY, prev, fields))
    code, report, _ = verify(cli, sid)
    assert code == 0, report["problems"]
    relink(
        cli, sid, lambda prev, fields: keyed_event_hash(REAL_KEY, prev, fields), edit=(seq, "actor", actor)
    )
    assert verify(cli, sid)[0] == 0


def test_events_before_the_cutover_keep_plain_links_and_the_cutover_is_signed(
    db: tuple[Cli, Sql], corpus: Path, tmp_path: Path
) -> None:
    cli, sql = db
    sid = published(cli, corpus, tmp_path)
    # As a database upgraded to keyed links finds it: this saga's events were linked plain,
    # and migration 0009 recorded the last of them as the cutover, unsigned yet.
    relink(cli, sid, event_hash)
    last = int(sql.one("SELECT max(seq) FROM events"))
    sql.run("UPDATE chain_marks SET seq = %s, mac = NULL WHERE name = 'plain_upto'", last)
    code, report, _ = verify(cli, sid)  # the first application with the key signs the cutover
    assert code == 0, report["problems"]
    assert report["events"]["plain"] == report["events"]["count"]
    assert sql.one("SELECT mac FROM chain_marks WHERE name = 'plain_upto'") is not None

    # Later events of the old saga are keyed, after the plain ones.
    assert cli.run("audit", "export", "--output", str(tmp_path / "cp.json")).returncode == 0
    fresh = published(cli, corpus, tmp_path / "b")
    code, report, _ = verify(cli, fresh)
    assert code == 0 and report["events"]["plain"] == 0

    # A forger raises the cutover so that the new saga's rewritten events pass as old ones.
    seq, _ = approval_event(sql, fresh)
    relink(cli, fresh, event_hash, edit=(seq, "actor", "mallory"))
    top = int(sql.one("SELECT max(seq) FROM events"))
    sql.run("UPDATE chain_marks SET seq = %s WHERE name = 'plain_upto'", top)
    code, report, _ = verify(cli, fresh)
    assert code == 4
    assert any(p.startswith("chain cutover: plain links up to event") for p in report["problems"])
    # The old saga is still readable as plain only while the signed cutover stands.
    sql.run("UPDATE chain_marks SET seq = %s WHERE name = 'plain_upto'", last)
    assert verify(cli, sid)[0] == 0 and verify(cli, fresh)[0] == 4


def test_a_checkpoint_finds_truncated_or_rewritten_history(
    db: tuple[Cli, Sql], corpus: Path, tmp_path: Path
) -> None:
    cli, sql = db
    sid = published(cli, corpus, tmp_path)
    path = tmp_path / "checkpoint.json"
    done = cli.run("audit", "export", "--output", str(path), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    saved = json.loads(path.read_text())
    assert summary["sagas"] == 1 and saved["sagas"][sid]["count"] == summary["events"] > 10
    later = published(cli, corpus, tmp_path / "later")

    def against(saga: str) -> tuple[int, dict[str, Any], str]:
        run = cli.run("audit", "verify", saga, "--against", str(path), "--json")
        assert "Traceback" not in run.stderr
        return run.returncode, json.loads(run.stdout) if run.stdout else {}, run.stderr

    code, report, _ = against(sid)
    assert code == 0 and report["checkpoint_file"] == {
        "listed": True,
        "count": saved["sagas"][sid]["count"],
        "problem": None,
    }
    code, report, _ = against(later)
    assert code == 0 and report["checkpoint_file"]["listed"] is False

    # A rewrite the key's holder could make (or a plain, pre-keyed saga's forger): the chain
    # verifies, the checkpoint does not.
    seq, actor = approval_event(sql, sid)
    keyed: Link = lambda prev, fields: keyed_event_hash(REAL_KEY, prev, fields)  # noqa: E731
    relink(cli, sid, keyed, edit=(seq, "actor", "mallory"))
    assert verify(cli, sid)[0] == 0
    code, report, err = against(sid)
    assert code == 4 and "history before it was rewritten" in report["problems"][-1]
    assert "history before it was rewritten" in err
    relink(cli, sid, keyed, edit=(seq, "actor", actor))
    assert against(sid)[0] == 0

    # Truncation: the saga's last events gone.
    tail = int(sql.one("SELECT max(seq) FROM events WHERE saga_id = %s", sid))
    sql.run("DELETE FROM events WHERE seq = %s", tail)
    code, report, _ = against(sid)
    assert code == 4 and "history before it was removed" in report["problems"][-1]
    # The whole saga gone: named by the checkpoint, refused rather than not found.
    remove_saga(sql, sid)
    code, report, _ = against(sid)
    assert code == 4 and "is gone from the database" in report["problems"][0]
    assert cli.run("audit", "verify", sid).returncode == 3

    # A checkpoint edited to fit, or not a checkpoint at all.
    forged = {**saved, "events": saved["events"] + 1}
    path.write_text(json.dumps(forged))
    code, _, err = against(later)
    assert code == 4 and "not signed with this database's key" in err
    path.write_text("{not json")
    code, _, err = against(later)
    assert code == 2 and err.count("\n") == 1 and "is not JSON" in err

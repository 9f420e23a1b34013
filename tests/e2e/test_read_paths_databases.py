"""Databases the quick SQLite path of `status` leaves to the store's full path
(`tests.support.read_paths`): one below the head migration, one not made yet."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.support.read_paths import Db, same


def test_a_database_below_the_head_migration_is_left_to_the_full_path(tmp_path: Path) -> None:
    from alembic import command
    from sqlalchemy import create_engine

    from orchestrator.store.schema import alembic_config, head_revision

    db = Db(tmp_path)
    engine = create_engine(db.url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0002")
    engine.dispose()
    done = db.run("status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sagas"] == []
    with sqlite3.connect(tmp_path / "pressroom.db") as conn:  # the full path upgraded it on first use
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]


def test_a_missing_database_is_made_by_the_full_path(tmp_path: Path) -> None:
    db = Db(tmp_path)
    assert json.loads(same(db, "status", "--json").stdout)["sagas"] == []
    assert (tmp_path / "pressroom.db").is_file()

"""The head read from the migration files is Alembic's head; anything but one chain is None."""

from __future__ import annotations

from pathlib import Path

from alembic.script import ScriptDirectory

from orchestrator.store.migration_head import head_from_files
from orchestrator.store.schema import alembic_config, head_revision


def test_the_files_head_is_alembic_s() -> None:
    alembic_head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert alembic_head is not None
    assert head_from_files() == alembic_head == head_revision()


def _revision(folder: Path, rev: str, down: str) -> None:
    (folder / f"{rev}_x.py").write_text(f'revision = "{rev}"\ndown_revision = {down}\n', encoding="utf-8")


def test_a_chain_a_fork_and_a_merge(tmp_path: Path) -> None:
    _revision(tmp_path, "0001", "None")
    _revision(tmp_path, "0002", '"0001"')
    assert head_from_files(tmp_path) == "0002"
    _revision(tmp_path, "0003", '"0001"')  # two heads
    assert head_from_files(tmp_path) is None
    (tmp_path / "0004_merge.py").write_text('revision = "0004"\ndown_revision = ("0002", "0003")\n')
    assert head_from_files(tmp_path) is None  # a merge: Alembic decides

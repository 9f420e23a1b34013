"""What a refresh looks at: folders whose listing is as recorded are skipped, every change is found.

The index, the file system and SQLite are real; `plan()` is tested as the pure
function it is, with the recorded signatures handed in.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

import roles
from roles import index_walk as walk
from roles.index import CorpusIndexes

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"


def _copy(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    return corpus


def test_a_folder_listed_as_recorded_is_not_compared_file_by_file() -> None:
    entries: list[walk.Entry] = [("a.md", 10, 1, 1, 7), ("b.txt", 20, 2, 2, 8), ("c.png", 5, 3, 3, 9)]
    folders = {
        "": walk.Folder("/corpus", entries),
        "sub/": walk.Folder("/corpus/sub", [("d.md", 1, 1, 1, 4)]),
    }
    asked: list[str] = []

    def signatures_in(prefix: str) -> dict[str, walk.Signature | None]:
        asked.append(prefix)
        return {"sub/d.md": (1, 1, 1, 4)} if prefix == "sub/" else {}

    todo = walk.plan(folders, {"": (walk.pack(entries), 2), "sub/": (None, 1)}, signatures_in)

    assert asked == ["sub/"]  # the root's listing is as recorded; sub/'s was forgotten
    assert (todo.unchanged, todo.check, todo.gone, todo.candidates) == (3, [], [], 3)
    assert todo.rows == {"": (walk.pack(entries), 2), "sub/": (walk.pack(folders["sub/"].entries), 1)}


def test_a_folder_listed_otherwise_is_compared_and_a_folder_gone_loses_its_files() -> None:
    entries: list[walk.Entry] = [("a.md", 10, 1, 1, 7), ("new.md", 3, 5, 5, 11), (".hidden.md", 1, 1, 1, 2)]
    recorded = {"": (walk.pack([("a.md", 10, 1, 1, 7)]), 1), "gone/": (b"x", 2)}
    stored: dict[str, dict[str, walk.Signature | None]] = {
        "": {"a.md": (10, 1, 1, 7), "old.md": (1, 1, 1, 1)},
        "gone/": {"gone/x.md": (1, 1, 1, 1), "gone/y.md": None},
    }

    todo = walk.plan({"": walk.Folder("/c", entries)}, recorded, lambda prefix: dict(stored[prefix]))

    assert todo.unchanged == 1
    assert todo.check == [walk.Check("new.md", "/c/new.md", (3, 5, 5, 11), False)]
    assert todo.gone == ["gone/x.md", "gone/y.md", "old.md"]
    assert list(todo.rows) == [""] and todo.candidates == 2


def test_a_file_rewritten_with_its_old_size_and_mtime_is_read_again(tmp_path: Path) -> None:
    corpus = _copy(tmp_path)
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    target = corpus / "bookmobile.txt"
    before = target.stat()
    text = target.read_text(encoding="utf-8")
    target.write_text("Z" + text[1:], encoding="utf-8")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime; the ctime moves on

    done = index.refresh()

    assert done.changed == ("bookmobile.txt",)
    assert index.source("bookmobile.txt").text.startswith("Z")


def test_a_file_indexed_by_a_source_read_and_deleted_before_the_refresh_is_removed(tmp_path: Path) -> None:
    corpus = _copy(tmp_path)
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    late = corpus / "late.md"
    late.write_text("The late zeppelin note.\n", encoding="utf-8")
    assert index.source("late.md").text == "The late zeppelin note.\n"
    late.unlink()  # the root folder lists what it listed at the last refresh again

    done = index.refresh()

    assert done.removed == ("late.md",)
    assert index.evidence("zeppelin").passages == ()


def test_a_removed_folder_loses_its_files_and_an_untouched_one_keeps_them(tmp_path: Path) -> None:
    corpus = _copy(tmp_path)
    for name in ("north", "south"):
        (corpus / name).mkdir()
        (corpus / name / "mill.md").write_text(f"The {name} mill ground corn.\n", encoding="utf-8")
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    shutil.rmtree(corpus / "north")

    done = index.refresh()

    assert (done.removed, done.added, done.changed, done.unchanged) == (("north/mill.md",), (), (), 7)
    assert [p.source for p in index.evidence("mill corn").passages] == ["south/mill.md"]
    assert index.refresh().files_read == 0


def test_an_index_file_of_the_fts5_layout_is_rebuilt(tmp_path: Path) -> None:
    corpus = _copy(tmp_path)
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.file.parent.mkdir(parents=True)
    with sqlite3.connect(index.file) as db:
        db.executescript(
            """
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO meta VALUES ('analyzer', '2;porter unicode61 remove_diacritics 2;600;1');
            CREATE TABLE files(path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER,
                inode INTEGER, digest TEXT, skipped TEXT, tainted INTEGER NOT NULL DEFAULT 0);
            INSERT INTO files(path, size, mtime_ns, ctime_ns, inode, digest) VALUES ('gone.md', 1, 1, 1, 1, 'x');
            CREATE VIRTUAL TABLE plain USING fts5(body);
            """
        )

    done = index.refresh()

    assert len(done.added) == 6 and done.removed == ()
    assert [p.source for p in index.evidence("bookmobile stops", limit=1).passages] == ["bookmobile.txt"]


def test_over_the_file_limit_the_first_files_in_corpus_order_are_indexed(tmp_path: Path) -> None:
    corpus = _copy(tmp_path)
    index = CorpusIndexes(tmp_path / "index", max_files=4).for_corpus(corpus)

    first = index.refresh()
    (corpus / "bookmobile.txt").unlink()
    second = index.refresh()

    names = sorted(p.name for p in SAMPLE.iterdir())
    assert first.added == tuple(names[:4])
    assert first.skipped[-1].path == names[4] and "file limit of 4" in first.skipped[-1].reason
    assert second.removed == ("bookmobile.txt",) and second.added == (names[4],)

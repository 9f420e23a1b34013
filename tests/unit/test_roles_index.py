"""The persistent corpus index: incremental refresh on real files, answers equal to per-call ranking.

Reads are counted by handing the index a `Reader` that counts and then reads
the real file; nothing about the file system is faked.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import roles
from orchestrator.core.errors import InvalidInput, NotFound
from roles.artifacts import SourceFile
from roles.corpus import SourceOutsideCorpus, load_corpus, read_source
from roles.index import CorpusIndexes, read_from_disk
from roles.ranking import collect_evidence

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"
EVAL = Path(__file__).resolve().parents[2] / "examples" / "eval"
SAMPLE_BRIEF = "A short history of the Millbrook public library, its branches and the book sale."


class CountingReader:
    """Counts the files the index reads, then reads them from disk."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, base: Path, path: Path, rel: str) -> SourceFile:
        self.paths.append(rel)
        return read_from_disk(base, path, rel)


def _corpora() -> list[tuple[Path, str]]:
    cases = [(SAMPLE, SAMPLE_BRIEF)]
    for case in sorted(EVAL.iterdir()):
        if (case / "expect.json").is_file():
            cases.append((case / "corpus", (case / "brief.txt").read_text(encoding="utf-8").strip()))
    return cases


def _bump(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime on, as an editor saving it later would."""
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.mark.parametrize(
    ("corpus", "brief"), _corpora(), ids=lambda v: getattr(v, "parent", Path(str(v))).name
)
def test_index_answers_equal_the_per_call_ranking(tmp_path: Path, corpus: Path, brief: str) -> None:
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    for query in (brief, "history of the bridge and its repairs", "library", "the of and", "windmill"):
        for limit in (1, 3, 8, 50):
            assert index.evidence(query, limit=limit) == collect_evidence(
                query, load_corpus(corpus), limit=limit
            )


def test_a_brief_naming_a_url_in_the_corpus_ranks_that_passage_too(tmp_path: Path) -> None:
    corpus = EVAL / "brief-url-allowed" / "corpus"
    brief = (EVAL / "brief-url-allowed" / "brief.txt").read_text(encoding="utf-8").strip()
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()

    evidence = index.evidence(brief)

    assert evidence == collect_evidence(brief, load_corpus(corpus))
    assert any("://" in p.text for p in evidence.passages)
    assert not any("://" in p.text for p in index.evidence("history of the Hollin bridge").passages)


def test_built_once_a_second_refresh_and_every_source_read_touch_no_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    reader = CountingReader()
    indexes = CorpusIndexes(tmp_path / "index", reader=reader)

    first = indexes.for_corpus(corpus).refresh()
    assert sorted(reader.paths) == sorted(first.added) and len(first.added) == 6
    reader.paths.clear()

    again = CorpusIndexes(tmp_path / "index", reader=reader).for_corpus(
        corpus
    )  # another saga, another object
    second = again.refresh()
    sources = [again.source(rel) for rel in first.added]
    again.evidence(SAMPLE_BRIEF)

    assert reader.paths == []
    assert (second.added, second.changed, second.removed, second.unchanged) == ((), (), (), 6)
    assert sources == [read_source(corpus, rel) for rel in first.added]


def test_one_changed_file_is_read_again_and_its_passages_replaced(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    reader = CountingReader()
    index = CorpusIndexes(tmp_path / "index", reader=reader).for_corpus(corpus)
    index.refresh()
    reader.paths.clear()
    target = corpus / "bookmobile.txt"
    _bump(target, "The Millbrook bookmobile now carries a zeppelin mural on both sides.\n")

    done = index.refresh()

    assert reader.paths == ["bookmobile.txt"]
    assert done.changed == ("bookmobile.txt",) and done.unchanged == 5
    found = index.evidence("zeppelin mural")
    assert [p.text for p in found.passages] == [
        "The Millbrook bookmobile now carries a zeppelin mural on both sides."
    ]
    old = (SAMPLE / "bookmobile.txt").read_text(encoding="utf-8")
    assert all(p.text not in old for p in index.evidence("bookmobile stops villages").passages)
    assert index.evidence("zeppelin bookmobile") == collect_evidence(
        "zeppelin bookmobile", load_corpus(corpus)
    )


def test_a_touched_file_with_the_same_bytes_is_read_but_reported_unchanged(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    reader = CountingReader()
    index = CorpusIndexes(tmp_path / "index", reader=reader).for_corpus(corpus)
    index.refresh()
    reader.paths.clear()
    _bump(corpus / "overview.md", (corpus / "overview.md").read_text(encoding="utf-8"))

    done = index.refresh()
    again = index.refresh()

    assert reader.paths == ["overview.md"]
    assert done.changed == () and done.unchanged == 6
    assert again.files_read == 0


def test_a_deleted_file_loses_its_passages_and_a_new_file_is_added(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    assert any(p.source == "bookmobile.txt" for p in index.evidence("bookmobile").passages)
    (corpus / "bookmobile.txt").unlink()
    (corpus / "extra").mkdir()
    (corpus / "extra" / "mill.md").write_text("The old mill ground corn until 1911.\n", encoding="utf-8")

    done = index.refresh()

    assert done.removed == ("bookmobile.txt",) and done.added == ("extra/mill.md",)
    assert all(p.source != "bookmobile.txt" for p in index.evidence("bookmobile").passages)
    assert index.evidence("bookmobile") == collect_evidence("bookmobile", load_corpus(corpus))
    with pytest.raises(NotFound):
        index.source("bookmobile.txt")


def test_skipped_files_are_remembered_and_not_read_again(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "ok.md").write_text("The windmill was restored.", encoding="utf-8")
    (corpus / "bad.txt").write_bytes(b"\xff\xfe windmill")
    reader = CountingReader()
    index = CorpusIndexes(tmp_path / "index", reader=reader).for_corpus(corpus)

    index.refresh()
    reader.paths.clear()
    index.refresh()

    assert reader.paths == []
    assert index.evidence("windmill") == collect_evidence("windmill", load_corpus(corpus))
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        index.source("bad.txt")


def test_source_checks_paths_like_read_source(tmp_path: Path) -> None:
    index = CorpusIndexes(tmp_path / "index").for_corpus(SAMPLE)
    index.refresh()
    for bad in ("../secret.md", "/etc/passwd", "a\\b.md"):
        with pytest.raises(SourceOutsideCorpus):
            index.source(bad)
    with pytest.raises(NotFound):
        index.source("missing.md")


def test_a_file_changed_after_the_refresh_is_read_fresh_by_source(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    reader = CountingReader()
    index = CorpusIndexes(tmp_path / "index", reader=reader).for_corpus(corpus)
    index.refresh()
    reader.paths.clear()
    _bump(corpus / "overview.md", "Changed after the refresh.\n")

    source = index.source("overview.md")

    assert reader.paths == ["overview.md"]
    assert source == read_source(corpus, "overview.md")
    assert index.refresh().files_read == 0


def test_refresh_unless_since_skips_a_walk_that_already_happened(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    done = index.refresh()

    assert index.refresh_unless_since(done.started_at) is None
    later = index.refresh_unless_since(done.started_at.replace(year=done.started_at.year + 1))
    assert later is not None and later.unchanged == 6


def test_one_index_file_per_corpus_folder(tmp_path: Path) -> None:
    indexes = CorpusIndexes(tmp_path / "index")
    a = indexes.for_corpus(SAMPLE)
    b = indexes.for_corpus(SAMPLE / ".." / "sample_corpus")
    c = indexes.for_corpus(EVAL / "movable-type" / "corpus")
    assert a.file == b.file != c.file


def test_an_unusable_index_file_is_a_clear_error(tmp_path: Path) -> None:
    index = CorpusIndexes(tmp_path / "index").for_corpus(SAMPLE)
    index.file.parent.mkdir(parents=True)
    index.file.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InvalidInput, match="corpus index"):
        index.refresh()


def test_the_index_folder_follows_the_settings(tmp_path: Path) -> None:
    from orchestrator.core.config import Settings

    db = Settings(database_url=f"sqlite:///{tmp_path / 'p.db'}", secret_file=tmp_path / "s")
    assert db.index_folder() == tmp_path / "p.db-index"
    pg = Settings(database_url="postgresql+psycopg://x@h/db", secret_file=tmp_path / "state" / "secret")
    assert pg.index_folder() == tmp_path / "state" / ".pressroom-index"
    chosen = Settings(index_dir=tmp_path / "idx")
    assert chosen.index_folder() == tmp_path / "idx"


def test_an_index_built_with_other_rules_is_rebuilt(tmp_path: Path) -> None:
    import sqlite3

    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    reader = CountingReader()
    index = CorpusIndexes(tmp_path / "index", reader=reader).for_corpus(corpus)
    index.refresh()
    with sqlite3.connect(index.file) as db:
        db.execute("UPDATE meta SET value = 'older rules' WHERE key = 'analyzer'")
    reader.paths.clear()

    index.refresh()

    assert len(reader.paths) == 6
    assert index.evidence(SAMPLE_BRIEF) == collect_evidence(SAMPLE_BRIEF, load_corpus(corpus))


def test_ties_beyond_the_search_window_keep_corpus_order(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in (7, 3, 11, 0, 9, 5, 1, 10, 4, 8, 2, 6):
        (corpus / f"copy-{i:02d}.md").write_text("The windmill was restored in 1990.\n", encoding="utf-8")
    (corpus / "other.md").write_text("A windmill, a windmill and a windmill.\n", encoding="utf-8")
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    for limit in (1, 2, 3, 5, 13):
        assert index.evidence("windmill", limit=limit) == collect_evidence(
            "windmill", load_corpus(corpus), limit=limit
        )


def test_an_index_file_stays_open_across_calls_of_one_thread(tmp_path: Path) -> None:
    indexes = CorpusIndexes(tmp_path / "index")
    index = indexes.for_corpus(SAMPLE)
    with indexes.connections.opened(index.file) as first:
        pass
    # Another `CorpusIndex` of the same folder (as every tool call makes) shares it.
    indexes.for_corpus(SAMPLE).source("overview.md")
    with indexes.connections.opened(index.file) as again:
        assert again is first


def test_an_index_file_removed_while_open_is_opened_again(tmp_path: Path) -> None:
    indexes = CorpusIndexes(tmp_path / "index")
    index = indexes.for_corpus(SAMPLE)
    before = index.source("overview.md")
    for leftover in index.file.parent.glob(index.file.name + "*"):
        leftover.unlink()
    again = indexes.for_corpus(SAMPLE).source("overview.md")
    assert again == before
    assert index.file.is_file()  # written anew, not into the unlinked file


def test_an_index_file_replaced_by_garbage_while_open_is_a_clear_error(tmp_path: Path) -> None:
    indexes = CorpusIndexes(tmp_path / "index")
    indexes.for_corpus(SAMPLE).source("overview.md")
    index = indexes.for_corpus(SAMPLE)
    for leftover in index.file.parent.glob(index.file.name + "*"):
        leftover.unlink()
    index.file.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InvalidInput, match="corpus index"):
        index.source("overview.md")
    # The failed call closed its connection: a repaired file is used by the next one.
    index.file.unlink()
    assert index.source("overview.md").path == "overview.md"


def test_each_thread_opens_its_own_connection(tmp_path: Path) -> None:
    import threading

    indexes = CorpusIndexes(tmp_path / "index")
    file = indexes.for_corpus(SAMPLE).file
    seen: list[object] = []

    def use() -> None:
        with indexes.connections.opened(file) as db:
            seen.append(db)

    use()
    worker = threading.Thread(target=use)
    worker.start()
    worker.join()
    assert len(seen) == 2 and seen[0] is not seen[1]

"""The persistent corpus index: incremental refresh on real files, answers as the FTS5 index gave them.

Reads are counted by handing the index a `Reader` that counts and then reads
the real file; nothing about the file system is faked.

The engine's BM25 is tantivy's, the per-call path's (`collect_evidence()`) is
SQLite FTS5's: the two agree on what an answer holds apart from its ranking
(suspicious passages, reasons, skipped files, counts) and on which passages
match a brief; the ranking is compared with the answers the FTS5 index gave,
recorded in `tests/fixtures/index_answers_fts5.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

import roles
from orchestrator.core.errors import InvalidInput, NotFound
from roles import index_search
from roles.artifacts import Evidence, SourceFile
from roles.corpus import SourceOutsideCorpus, load_corpus, read_source
from roles.index import CorpusIndexes, read_from_disk
from roles.ranking import collect_evidence

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"
EVAL = Path(__file__).resolve().parents[2] / "examples" / "eval"
SAMPLE_BRIEF = "A short history of the Millbrook public library, its branches and the book sale."
ROOT = Path(__file__).resolve().parents[2]
FTS5_ANSWERS = ROOT / "tests" / "fixtures" / "index_answers_fts5.json"
# The briefs whose FTS5 ranking the engine does not reproduce exactly, and why:
# - FTS5 gives a term found in more than half of the passages an IDF of about zero, so the
#   passages matching only such terms score 0, tie, and come in corpus order; tantivy's IDF,
#   ln(1 + (N - n + 0.5) / (n + 0.5)), stays positive and orders them by their words;
# - the sample brief: the two BM25 variants (IDF above, and tantivy's one-byte length norm)
#   swap its two best passages (FTS5: 2.67 and 2.35) and reorder the tail.
RANKED_OTHERWISE = {
    ("roles/sample_corpus", SAMPLE_BRIEF),
    (
        "examples/eval/church-bells/corpus",
        "Write about the bells of St Aidan's church and the ringers who ring them.",
    ),
    (
        "examples/eval/injection-several-forms/corpus",
        "Write about the bells of St Aidan's church and the ringers who ring them.",
    ),
    (
        "examples/eval/external-image/corpus",
        "Write a short history of the Hollin canal, its locks and their restoration.",
    ),
    (
        "examples/eval/movable-type/corpus",
        "Write a short history of movable type printing, from its origins in East Asia to Gutenberg's press.",
    ),
    *(
        (
            f"examples/eval/{case}/corpus",
            "Summarize the history of the Merton tram network from its opening to its return.",
        )
        for case in ("fault-timeout-after-apply-status-known", "foreign-link-markdown", "tram-network")
    ),
}


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


def _screening(evidence: Evidence) -> Evidence:
    """Everything an answer holds apart from its ranked passages."""
    return evidence.model_copy(update={"passages": ()})


def _ranked(evidence: Evidence) -> list[tuple[str, int]]:
    return [(p.source, p.start) for p in evidence.passages]


def _bump(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime on, as an editor saving it later would."""
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.mark.parametrize(
    ("corpus", "brief"), _corpora(), ids=lambda v: getattr(v, "parent", Path(str(v))).name
)
def test_index_answers_screen_and_match_as_the_per_call_path(
    tmp_path: Path, corpus: Path, brief: str
) -> None:
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    for query in (brief, "history of the bridge and its repairs", "library", "the of and", "windmill"):
        for limit in (1, 3, 8):
            found = index.evidence(query, limit=limit)
            expected = collect_evidence(query, load_corpus(corpus), limit=limit)
            assert _screening(found) == _screening(expected)
            assert len(found.passages) == len(expected.passages)
        every = collect_evidence(query, load_corpus(corpus), limit=1000)
        assert sorted(_ranked(index.evidence(query, limit=1000))) == sorted(_ranked(every))


def test_index_answers_equal_the_recorded_fts5_answers(tmp_path: Path) -> None:
    recorded = json.loads(FTS5_ANSWERS.read_text(encoding="utf-8"))["answers"]
    indexes = CorpusIndexes(tmp_path / "index")
    refreshed: set[str] = set()
    exact = 0
    for answer in recorded:
        index = indexes.for_corpus(ROOT / answer["corpus"])
        if answer["corpus"] not in refreshed:
            index.refresh()
            refreshed.add(answer["corpus"])
        found = _ranked(index.evidence(answer["query"], limit=answer["limit"]))
        expected = [(source, start) for source, start, _end, _score in answer["ranked"]]
        assert len(found) == len(expected), answer
        exact += found == expected
        if (answer["corpus"], answer["query"]) not in RANKED_OTHERWISE:
            assert found == expected, answer
        elif answer["limit"] == 50:
            assert sorted(found) == sorted(expected), answer  # every match, ranked otherwise
    assert exact == 936  # of 960 (docs/architecture.md, *Corpus index*)


def test_a_brief_naming_a_url_in_the_corpus_ranks_that_passage_too(tmp_path: Path) -> None:
    corpus = EVAL / "brief-url-allowed" / "corpus"
    brief = (EVAL / "brief-url-allowed" / "brief.txt").read_text(encoding="utf-8").strip()
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()

    evidence = index.evidence(brief)

    expected = collect_evidence(brief, load_corpus(corpus))
    assert _screening(evidence) == _screening(expected) and _ranked(evidence) == _ranked(expected)
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
    expected = collect_evidence("zeppelin bookmobile", load_corpus(corpus))
    assert _screening(index.evidence("zeppelin bookmobile")) == _screening(expected)
    assert _ranked(index.evidence("zeppelin bookmobile")) == _ranked(expected)


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
    expected = collect_evidence("bookmobile", load_corpus(corpus))
    assert _screening(index.evidence("bookmobile")) == _screening(expected)
    assert _ranked(index.evidence("bookmobile")) == _ranked(expected)
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
    expected = collect_evidence("windmill", load_corpus(corpus))
    assert _screening(index.evidence("windmill")) == _screening(expected)
    assert _ranked(index.evidence("windmill")) == _ranked(expected)
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
    fresh = CorpusIndexes(tmp_path / "fresh").for_corpus(corpus)
    fresh.refresh()
    assert index.evidence(SAMPLE_BRIEF) == fresh.evidence(SAMPLE_BRIEF)


def test_ties_beyond_the_search_window_keep_corpus_order(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in (7, 3, 11, 0, 9, 5, 1, 10, 4, 8, 2, 6):
        (corpus / f"copy-{i:02d}.md").write_text("The windmill was restored in 1990.\n", encoding="utf-8")
    (corpus / "other.md").write_text("A windmill, a windmill and a windmill.\n", encoding="utf-8")
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    for limit in (1, 2, 3, 5, 13):
        expected = collect_evidence("windmill", load_corpus(corpus), limit=limit)
        assert _ranked(index.evidence("windmill", limit=limit)) == _ranked(expected)


def test_ties_are_broken_by_the_order_passages_entered_the_index(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(40):
        (corpus / f"copy-{i:02d}.md").write_text("The windmill was restored in 1990.\n", encoding="utf-8")
    index = CorpusIndexes(tmp_path / "index").for_corpus(corpus)
    index.refresh()
    _bump(corpus / "copy-00.md", "The windmill was restored in 1991.\n")  # same words, same score
    index.refresh()

    answers = [index.evidence("windmill", limit=40) for _ in range(3)]
    elsewhere = CorpusIndexes(tmp_path / "index").for_corpus(corpus).evidence("windmill", limit=40)

    order = [p.source for p in answers[0].passages]
    assert order == [f"copy-{i:02d}.md" for i in range(1, 40)] + ["copy-00.md"]
    assert len({p.score for p in answers[0].passages}) == 1
    assert answers[1] == answers[0] == answers[2] == elsewhere
    assert [p.source for p in index.evidence("windmill", limit=3).passages] == order[:3]


def test_ties_keep_the_order_passages_entered_after_the_engine_merges_its_segments(tmp_path: Path) -> None:
    # 24 refreshes of three tied passages each: the engine merges its segments, and its own
    # order of ties (its internal addresses) stops being the order passages entered.
    for run in ("a", "b"):
        corpus = tmp_path / run / "corpus"
        corpus.mkdir(parents=True)
        index = CorpusIndexes(tmp_path / run / "index").for_corpus(corpus)
        for r in range(24):
            for i in range(3):
                (corpus / f"r{r:02d}-{i}.md").write_text(
                    "The windmill was restored in 1990.\n", encoding="utf-8"
                )
            index.refresh()
        for limit in (1, 2, 5):
            expected = collect_evidence("windmill", load_corpus(corpus), limit=limit)
            assert _ranked(index.evidence("windmill", limit=limit)) == _ranked(expected)


def test_a_renamed_file_is_removed_and_added_under_its_new_path(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    reader = CountingReader()
    index = CorpusIndexes(tmp_path / "index", reader=reader).for_corpus(corpus)
    index.refresh()
    reader.paths.clear()
    (corpus / "moved").mkdir()
    (corpus / "bookmobile.txt").rename(corpus / "moved" / "bookmobile.txt")

    done = index.refresh()

    assert (done.added, done.removed, done.changed) == (("moved/bookmobile.txt",), ("bookmobile.txt",), ())
    assert reader.paths == ["moved/bookmobile.txt"]
    sources = {p.source for p in index.evidence("bookmobile", limit=50).passages}
    assert "moved/bookmobile.txt" in sources and "bookmobile.txt" not in sources
    fresh = CorpusIndexes(tmp_path / "fresh").for_corpus(corpus)
    fresh.refresh()
    assert sorted(_ranked(index.evidence("bookmobile", limit=50))) == sorted(
        _ranked(fresh.evidence("bookmobile", limit=50))
    )


def _generation(file: Path) -> int:
    with sqlite3.connect(file) as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(value)


def test_an_engine_ahead_of_its_record_is_rebuilt_from_the_record(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    indexes = CorpusIndexes(tmp_path / "index")
    index = indexes.for_corpus(corpus)
    index.refresh()
    before = index.evidence(SAMPLE_BRIEF)
    # A refresh that died between its two commits: the engine holds a passage the record does
    # not (under the id of a passage that says something else), at the next generation.
    batch = indexes.engines.get(index.engine_folder).batch()
    batch.add([(1, "bookmobile.txt", "The zeppelin hangar.")])
    batch.commit(_generation(index.file) + 1)

    assert index.evidence("zeppelin").passages == ()
    assert (
        CorpusIndexes(tmp_path / "index").for_corpus(corpus).evidence(SAMPLE_BRIEF).passages
        == before.passages
    )
    assert index.evidence(SAMPLE_BRIEF).passages == before.passages


def test_a_refresh_repairs_an_engine_ahead_of_its_record(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    indexes = CorpusIndexes(tmp_path / "index")
    index = indexes.for_corpus(corpus)
    index.refresh()
    batch = indexes.engines.get(index.engine_folder).batch()
    batch.remove("overview.md")
    batch.commit(_generation(index.file) + 1)
    _bump(corpus / "bookmobile.txt", "The zeppelin bookmobile.\n")

    done = index.refresh()

    assert done.changed == ("bookmobile.txt",)
    assert {p.source for p in index.evidence("library", limit=50).passages} >= {"overview.md"}
    assert [p.source for p in index.evidence("zeppelin").passages] == ["bookmobile.txt"]


def test_an_unusable_engine_folder_is_a_clear_error(tmp_path: Path) -> None:
    index = CorpusIndexes(tmp_path / "index").for_corpus(SAMPLE)
    index.engine_folder.mkdir(parents=True)
    (index.engine_folder / "meta.json").write_text("this is not an index", encoding="utf-8")
    with pytest.raises(InvalidInput, match="corpus index"):
        index.refresh()


def test_the_analyzer_folds_case_and_accents_and_stems() -> None:
    assert index_search.analyzer().analyze("Naïve Straße locks") == ["naiv", "strass", "lock"]


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

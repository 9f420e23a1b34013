"""BM25 ranking over FTS5 and the evidence the researcher assembles from a corpus."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

import roles
from roles.artifacts import Passage
from roles.corpus import CorpusLoad, load_corpus
from roles.ranking import TAINTED_SOURCE, collect_evidence, match_query, query_terms, rank, score_texts

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"
DIGEST = hashlib.sha256(b"x").hexdigest()


def _passages(*texts: str) -> list[Passage]:
    return [
        Passage(source=f"f{i}.md", source_digest=DIGEST, start=0, end=len(t), text=t)
        for i, t in enumerate(texts)
    ]


def test_query_terms_drop_stopwords_duplicates_and_fold_case_and_accents() -> None:
    assert query_terms("Write a short history of the Café and the CAFÉ's bookmobile, please!") == [
        "history",
        "cafe",
        "bookmobile",
    ]
    assert query_terms("the of and") == []
    assert query_terms("route 9 x") == ["route", "9"]


def test_match_query_quotes_every_term() -> None:
    assert match_query(["library", 'odd"term']) == '"library" OR "odd""term"'


@pytest.mark.parametrize(
    "brief",
    [
        'library" OR NEAR(',
        "library* AND -NOT {col}:x",
        "^library",
        "library) OR (",
        "library'; DROP TABLE doc; --",
    ],
)
def test_fts5_syntax_in_the_brief_is_only_words(brief: str) -> None:
    ranked = rank(brief, _passages("The library opened in 1902.", "Nothing here."))
    assert [p.text for p in ranked] == ["The library opened in 1902."]


def test_rank_orders_by_bm25_best_first_with_positive_scores() -> None:
    passages = _passages(
        "The bakery sells bread.",
        "The bookmobile visits villages. The bookmobile has a wheelchair lift.",
        "A bookmobile stop lasts one hour.",
    )

    ranked = rank("bookmobile stops", passages)

    assert [p.source for p in ranked] == ["f2.md", "f1.md"]
    assert ranked[0].score >= ranked[1].score > 0
    assert ranked[0].text == passages[2].text


def test_rank_honours_the_limit_and_keeps_input_order_on_ties() -> None:
    passages = _passages(*["The library is open." for _ in range(5)])
    ranked = rank("library", passages, limit=3)
    assert [p.source for p in ranked] == ["f0.md", "f1.md", "f2.md"]
    assert rank("library", passages, limit=0) == []


def test_no_matching_term_gives_nothing() -> None:
    passages = _passages("The library opened in 1902.")
    assert rank("underwater hockey", passages) == []
    assert rank("the and of", passages) == []
    assert rank("library", []) == []


def test_matching_ignores_accents_and_stems_plurals() -> None:
    passages = _passages("The café opens at nine.", "Two branches opened in 1986.")
    assert [p.source for p in rank("cafe", passages)] == ["f0.md"]
    assert [p.source for p in rank("branch", passages)] == ["f1.md"]


def test_score_texts_returns_indexes_and_scores() -> None:
    scored = score_texts("windmill", ["A windmill.", "A bridge.", "The windmill and the windmill trust."])
    assert sorted(i for i, _ in scored) == [0, 2]
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    assert [i for i, _ in score_texts("windmill", ["A windmill.", "A windmill."], limit=1)] == [0]


def test_sample_evidence_sets_the_injected_file_aside() -> None:
    brief = "A short history of the Millbrook public library, its branches and the book sale."

    evidence = collect_evidence(brief, load_corpus(SAMPLE))

    assert evidence.files_read == 6
    assert evidence.skipped == ()
    assert 0 < len(evidence.passages) <= 8
    assert all(not p.suspicious and p.reasons == () for p in evidence.passages)
    assert "friends-book-sale.md" not in {p.source for p in evidence.passages}
    assert {p.source for p in evidence.suspicious} == {"friends-book-sale.md"}
    assert all(p.suspicious and p.reasons for p in evidence.suspicious)
    injected = [p for p in evidence.suspicious if "Ignore your previous instructions" in p.text]
    assert len(injected) == 1
    assert {r.split(":")[0] for r in injected[0].reasons} >= {"ignore-instructions", "approval-change"}
    assert any(p.reasons == (TAINTED_SOURCE,) for p in evidence.suspicious)
    scores = [p.score for p in evidence.passages]
    assert scores == sorted(scores, reverse=True)


def test_a_foreign_url_sets_aside_only_its_own_passage(tmp_path: Path) -> None:
    (tmp_path / "bridge.md").write_text(
        "The bridge opened in 1782.\n\nPhotos of the bridge are at https://x.example/p.\n\n"
        "The bridge was repaired in 1998.\n",
        encoding="utf-8",
    )

    evidence = collect_evidence("bridge history", load_corpus(tmp_path))

    assert [p.text for p in evidence.suspicious] == ["Photos of the bridge are at https://x.example/p."]
    assert len(evidence.passages) == 2


def test_skipped_files_are_carried_into_the_evidence(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("The windmill was restored.", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe windmill")

    evidence = collect_evidence("windmill", load_corpus(tmp_path))

    assert [s.path for s in evidence.skipped] == ["bad.txt"]
    assert evidence.files_read == 1


def test_a_thousand_files_rank_in_one_index_build(tmp_path: Path) -> None:
    for i in range(1200):
        topic = "lighthouse keeper" if i == 777 else "harbour crane"
        (tmp_path / f"doc{i:04d}.md").write_text(
            f"# Doc {i}\n\nThis note {i} describes the {topic} in plain words.\n\n"
            f"A second paragraph about the quay and the tide tables of year {1900 + i % 100}.\n",
            encoding="utf-8",
        )
    load = load_corpus(tmp_path)

    started = time.perf_counter()
    evidence = collect_evidence("the lighthouse keeper", load)
    elapsed = time.perf_counter() - started

    assert evidence.files_read == 1200
    assert evidence.passages[0].source == "doc0777.md"
    assert elapsed < 10, f"ranking 1,200 files took {elapsed:.1f}s"


def test_empty_corpus_gives_empty_evidence() -> None:
    evidence = collect_evidence("anything at all", CorpusLoad(files=(), skipped=()))
    assert evidence.passages == () and evidence.suspicious == () and evidence.files_read == 0

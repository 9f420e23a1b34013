"""The corpus index's search engine: a tantivy index of the clean passages.

This module owns every tantivy call. An index folder sits beside the corpus's
SQLite file (`roles.index_file`), which stays the record: a passage's text,
offsets and file live there, and the engine holds for each clean passage its
id, its file's path (to delete a file's passages at once) and its analysed
text. Nothing is stored in the engine that SQLite does not hold, so the
engine can always be rebuilt from the SQLite file.

Search is top-k: a disjunction of term queries, collected by tantivy's
block-max WAND, so a brief's cost follows the passages that can enter the top,
not every passage holding one of its words. Scores are tantivy's BM25 (a
passage's score, higher is better). Ties are broken by the passage id, the
order passages entered the index (corpus order for a file set indexed in one
refresh), never by the engine's internal addresses: when the tie at the cut
reaches past the first window, every hit with that score is collected.

**Generations.** The engine holds one marker document whose ``generation``
fast field says which SQLite state it matches. A refresh commits the engine
first (marker moved on), then its SQLite transaction (the same generation
recorded in ``meta``). A reader that finds the two differ has caught a refresh
between its two commits, or one that crashed between them: see
`roles.index.CorpusIndex`.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final, cast

import tantivy

ANALYZER_NAME: Final = "pressroom"
# The tokenizer: words are runs of letters and digits, lower-cased, folded to ASCII, stemmed
# with the Snowball English stemmer. Changing it changes `ENGINE`, which rebuilds every index.
ENGINE: Final = f"{getattr(tantivy, '__version__', 'tantivy')};simple,lowercase,ascii_fold,stemmer-english"
MARKER: Final = "generation"
WINDOW: Final = 4
WRITER_HEAP: Final = 32_000_000


class EngineError(Exception):
    """The engine's folder cannot be opened or written; the message says why."""


def analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("id", indexed=False, fast=True)
    builder.add_text_field("path", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("body", tokenizer_name=ANALYZER_NAME, index_option="position")
    builder.add_text_field("marker", tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("generation", fast=True)
    return builder.build()


SCHEMA: Final = _schema()
_ANALYZER: Final = analyzer()


def _passage_doc(passage_id: int, path: str, text: str) -> tantivy.Document:
    doc = tantivy.Document()
    doc.add_unsigned("id", passage_id)
    doc.add_text("path", path)
    doc.add_text("body", text)
    return doc


def _marker_doc(generation: int) -> tantivy.Document:
    doc = tantivy.Document()
    doc.add_text("marker", MARKER)
    doc.add_unsigned("generation", generation)
    return doc


def query(terms: Sequence[str]) -> tantivy.Query | None:
    """The brief's terms, analysed as the passages are, as one disjunction of term queries
    over ``body`` (the shape block-max WAND prunes); None when no term leaves a token.

    Two terms with one stem are two clauses, as they were two phrases in the FTS5 query."""
    clauses = [
        (tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "body", token))
        for term in terms
        for token in _ANALYZER.analyze(term)
    ]
    return tantivy.Query.boolean_query(clauses) if clauses else None


def top(searcher: tantivy.Searcher, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """(passage id, score) of the `limit` best passages, best first, ties by id."""
    q = query(terms)
    if q is None or limit <= 0:
        return []
    window = WINDOW * limit + 1
    hits = searcher.search(q, limit=window, count=False).hits
    if len(hits) == window and hits[-1][0] == hits[limit - 1][0]:
        # The tie at the cut may go on past the window: take every hit down to the end of it.
        everything = cast(Any, searcher.search(q, limit=1, count=True)).count
        hits = searcher.search(q, limit=max(int(everything), window), count=False).hits
    if not hits:
        return []
    cut = hits[min(limit, len(hits)) - 1][0]
    # Hits come best first, so the tie at the cut is one run of them.
    first = bisect.bisect_left(hits, -cut, key=lambda hit: -hit[0])
    end = bisect.bisect_right(hits, -cut, key=lambda hit: -hit[0])
    above = hits[:first]
    ids = searcher.fast_field_values("id", [address for _, address in above])
    ranked = sorted(
        ((int(i), float(score)) for (score, _), i in zip(above, ids, strict=True) if i is not None),
        key=lambda item: (-item[1], item[0]),
    )
    # The tie can be thousands of passages: their ids are read in one call and sorted as ints.
    tied = sorted(
        i for i in searcher.fast_field_values("id", [a for _, a in hits[first:end]]) if i is not None
    )
    ranked += [(int(i), float(cut)) for i in tied[: limit - len(ranked)]]
    return ranked[:limit]


def rank_texts(terms: Sequence[str], texts: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """(index, score) of the best `limit` texts, in a throwaway in-memory index; ties keep input order."""
    if not terms or not texts or limit <= 0:
        return []
    index = tantivy.Index(SCHEMA)
    index.register_tokenizer(ANALYZER_NAME, _ANALYZER)
    writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
    for i, text in enumerate(texts):
        writer.add_document(_passage_doc(i, "", text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return top(index.searcher(), terms, limit)


class Engine:
    """One corpus's engine folder, opened once per process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.index = tantivy.Index(SCHEMA, path=str(folder), reuse=True)
            self.index.register_tokenizer(ANALYZER_NAME, _ANALYZER)
            self.index.config_reader("Manual")
        except (OSError, ValueError) as error:
            raise EngineError(str(error)) from None

    def searcher(self) -> tantivy.Searcher:
        """A searcher on the last commit (reloaded now)."""
        try:
            self.index.reload()
            return self.index.searcher()
        except (OSError, ValueError) as error:
            raise EngineError(str(error)) from None

    @staticmethod
    def generation(searcher: tantivy.Searcher) -> int | None:
        hits = searcher.search(tantivy.Query.term_query(SCHEMA, "marker", MARKER), limit=2, count=False).hits
        if len(hits) != 1:
            return None
        (value,) = searcher.fast_field_values("generation", [hits[0][1]])
        return None if value is None else int(value)

    def batch(self) -> Batch:
        return Batch(self)


class Batch:
    """The engine side of one refresh: opened on its first change, committed by `commit()`.

    The caller holds the SQLite write lock, so one batch at a time runs on a corpus.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._writer: tantivy.IndexWriter | None = None

    def _open(self) -> tantivy.IndexWriter:
        if self._writer is None:
            try:
                self._writer = self.engine.index.writer(heap_size=WRITER_HEAP, num_threads=1)
            except (OSError, ValueError) as error:
                raise EngineError(str(error)) from None
        return self._writer

    @property
    def changed(self) -> bool:
        return self._writer is not None

    def clear(self) -> None:
        self._open().delete_all_documents()

    def remove(self, path: str) -> None:
        self._open().delete_documents_by_term("path", path)

    def add(self, passages: Iterable[tuple[int, str, str]]) -> None:
        writer = self._open()
        for passage_id, path, text in passages:
            writer.add_document(_passage_doc(passage_id, path, text))

    def commit(self, generation: int) -> None:
        writer = self._open()
        try:
            writer.delete_documents_by_term("marker", MARKER)
            writer.add_document(_marker_doc(generation))
            writer.commit()
            writer.wait_merging_threads()
        except (OSError, ValueError) as error:
            raise EngineError(str(error)) from None
        finally:
            self._writer = None

    def abandon(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.rollback()
                writer.wait_merging_threads()
            except (OSError, ValueError):
                pass


class Engines:
    """Engine folders opened in this process (a forked child opens its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._held: dict[Path, Engine] = {}

    def get(self, folder: Path) -> Engine:
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._held = os.getpid(), {}
            engine = self._held.get(folder)
            if engine is None or not folder.is_dir():
                engine = self._held[folder] = Engine(folder)
            return engine

    def forget(self, folder: Path) -> None:
        with self._lock:
            self._held.pop(folder, None)


__all__ = [
    "ENGINE",
    "Batch",
    "Engine",
    "EngineError",
    "Engines",
    "analyzer",
    "query",
    "rank_texts",
    "top",
]

"""Choosing evidence for a brief: BM25 ranking over SQLite FTS5, and the evidence it yields.

`rank()` builds one in-memory FTS5 index per call (``porter`` stemming over the
``unicode61`` tokenizer with diacritics removed) and orders passages by
``bm25()``; a passage's score is ``-bm25`` so higher is better. The MATCH query
is built from the brief's words only: stopwords dropped, each term quoted as an
FTS5 string, terms joined with OR, so no brief can inject FTS5 syntax.

`collect_evidence()` is the researcher's selection: it cuts the corpus into
passages, sets aside every passage `injection.assess()` objects to (and every
passage of a file that tries to instruct the agent), and ranks the rest.

No file or network I/O: the corpus arrives already read.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Sequence
from contextlib import closing
from typing import Final

from roles.artifacts import Evidence, Passage
from roles.corpus import CorpusLoad, split_passages
from roles.injection import assess, taints_source

TAINTED_SOURCE: Final = "tainted-source: another passage of this file reads as instructions"
MAX_TERMS: Final = 32
DEFAULT_LIMIT: Final = 8

_WORD = re.compile(r"[^\W_]+")
_TOKENIZER = "porter unicode61 remove_diacritics 2"

STOPWORDS: Final = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves
    please write draft short brief summary summarize summarise article page document produce
    create explain describe give tell include including using use make overview notes piece text
    """.split()
)


def fold(text: str) -> str:
    """Case- and diacritic-insensitive form of `text`, as the FTS5 tokenizer sees it."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def query_terms(brief: str) -> list[str]:
    """The brief's search terms: folded words, stopwords and lone letters dropped, first
    occurrence order, at most `MAX_TERMS`."""
    terms: list[str] = []
    for word in _WORD.findall(fold(brief)):
        if word in STOPWORDS or (len(word) == 1 and not word.isdigit()) or word in terms:
            continue
        terms.append(word)
        if len(terms) == MAX_TERMS:
            break
    return terms


def match_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: every term a quoted string, joined with OR."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def score_texts(brief: str, texts: Sequence[str], limit: int | None = None) -> list[tuple[int, float]]:
    """(index, score) of the texts that match the brief, best first; score = -bm25.

    Ties keep input order. Texts that match no brief term are left out.
    """
    terms = query_terms(brief)
    if not terms or not texts or (limit is not None and limit <= 0):
        return []
    with closing(sqlite3.connect(":memory:")) as db:
        db.execute(f"CREATE VIRTUAL TABLE doc USING fts5(body, tokenize='{_TOKENIZER}')")
        db.executemany("INSERT INTO doc(rowid, body) VALUES (?, ?)", enumerate(texts))
        rows = db.execute(
            "SELECT rowid, bm25(doc) FROM doc WHERE doc MATCH ? ORDER BY bm25(doc), rowid LIMIT ?",
            (match_query(terms), -1 if limit is None else limit),
        ).fetchall()
    return [(int(rowid), -float(bm25)) for rowid, bm25 in rows]


def rank(brief: str, passages: Sequence[Passage], limit: int = DEFAULT_LIMIT) -> list[Passage]:
    """The `limit` passages that best match the brief, best first, each with its score.

    A brief with no usable terms, or no matching passage, gives ``[]``.
    """
    scored = score_texts(brief, [p.text for p in passages], limit)
    return [passages[i].model_copy(update={"score": score}) for i, score in scored]


def collect_evidence(brief: str, corpus: CorpusLoad, *, limit: int = DEFAULT_LIMIT) -> Evidence:
    """Passages for the brief: suspicious ones set aside (all of them, in corpus order),
    the clean ones ranked and cut to `limit`."""
    clean: list[Passage] = []
    suspicious: list[Passage] = []
    for file in corpus.files:
        assessed = [(p, assess(p.text, brief)) for p in split_passages(file)]
        tainted = any(taints_source(reasons) for _, reasons in assessed)
        for passage, reasons in assessed:
            if tainted and not reasons:
                reasons = [TAINTED_SOURCE]
            if reasons:
                suspicious.append(passage.model_copy(update={"suspicious": True, "reasons": tuple(reasons)}))
            else:
                clean.append(passage)
    return Evidence(
        brief=brief,
        passages=tuple(rank(brief, clean, limit)),
        suspicious=tuple(suspicious),
        skipped=corpus.skipped,
        files_read=len(corpus.files),
    )

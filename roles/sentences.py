"""Sentence-level support: each sentence that states something, and the quotes behind it.

`claims()` splits a body paragraph into sentences and gives each the citation
markers it carries; a marker written after a sentence's full stop
(``… in 1901. [2]``) belongs to that sentence. `states_something()` says
whether a sentence makes a claim (a question, or a line of no words, does
not). `supports()` says whether a quote backs a sentence: every number in the
sentence occurs in the quote, and at least `SUPPORT_RATIO` of its content
words do (a word matches one of the quote's when they are equal or share a
stem of `STEM` characters, so "libraries" meets "library"). A sentence copied
from its quote is always supported.

No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from roles.corpus import sentence_spans

SUPPORT_RATIO: Final = 0.6
STEM: Final = 5
_MARKER = re.compile(r"\[([1-9][0-9]*)\](?![(:\[])")
_LEADING_MARKERS = re.compile(r"^(?:\s*\[[1-9][0-9]*\])+[.,;:]?\s*")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_TIGHT = re.compile(r"\s+([.,;:!?])")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_STOP: Final = frozenset(
    """a an the and or but nor so yet of in on at to for from by with as into onto over under about
    after before between during through since until upon within without against among is are was
    were be been being am has have had do does did it its it's this that these those there here
    their they them he his she her we our you your i me my not no than then also very more most
    which who whom whose what when where why how all any each some such can could may might must
    shall should will would one""".split()
)


@dataclass(frozen=True)
class Claim:
    """One sentence of a paragraph: its number (1-based), its text without markers, its markers."""

    number: int
    text: str
    markers: tuple[str, ...]


def claims(paragraph: str) -> list[Claim]:
    """The sentences of `paragraph` with the markers each carries, in order."""
    text = " ".join(paragraph.split())
    pieces: list[tuple[str, list[str]]] = []
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        leading = _LEADING_MARKERS.match(sentence)
        if leading and pieces:
            # `… 1901. [2] The next …`: the marker closes the sentence before it.
            pieces[-1][1].extend(_markers(leading.group(0)))
            sentence = sentence[leading.end() :]
        if sentence.strip():
            pieces.append((sentence, _markers(sentence)))
    found: list[Claim] = []
    for sentence, markers in pieces:
        plain = _TIGHT.sub(r"\1", " ".join(_MARKER.sub(" ", sentence).split()))
        found.append(Claim(len(found) + 1, plain, tuple(dict.fromkeys(markers))))
    return found


def _markers(text: str) -> list[str]:
    return [f"[{n}]" for n in _MARKER.findall(text)]


def states_something(sentence: str) -> bool:
    """A sentence that makes a claim: it has a content word and is not a question."""
    return not sentence.rstrip().endswith("?") and bool(content_words(sentence))


def content_words(text: str) -> list[str]:
    """The words that carry a sentence's meaning, casefolded, in order."""
    return [w for w in (m.group(0).casefold() for m in _WORD.finditer(text)) if w not in _STOP]


def supports(quotes: Iterable[str], sentence: str) -> bool:
    """Whether the quotes, together, back the sentence (see the module docstring)."""
    joined = " ".join(" ".join(q.split()) for q in quotes)
    plain = " ".join(sentence.split()).rstrip(" .")
    if not joined:
        return False
    if plain and plain.casefold() in joined.casefold():
        return True
    numbers = set(_NUMBER.findall(joined))
    if any(n not in numbers for n in _NUMBER.findall(sentence)):
        return False
    words = content_words(sentence)
    if not words:
        return True
    vocabulary = set(content_words(joined))
    matched = sum(1 for w in words if _known(w, vocabulary))
    return matched / len(words) >= SUPPORT_RATIO


def _known(word: str, vocabulary: set[str]) -> bool:
    if word in vocabulary:
        return True
    if len(word) < STEM:
        return False
    stem = word[:STEM]
    return any(len(v) >= STEM and v[:STEM] == stem for v in vocabulary)


__all__ = ["SUPPORT_RATIO", "Claim", "claims", "content_words", "states_something", "supports"]

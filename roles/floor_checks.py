"""The review's floor: what one cited sentence may not say beyond its own quotes.

`review()` runs these for every sentence that carries a citation, before any
judgment is heard, and a judgment can never turn one of their findings into a
pass. Each says what it found, quoting the token:

- ``number-not-in-quote``: every number in the sentence (digits with their
  separators, and the number words one to twenty) is a number of one of its
  quotes, compared as values ("1,500" is "1500", "four" is "4");
- ``entity-not-in-quote``: every capitalised word of two letters or more that
  does not open the sentence (nor follows a colon or an opening quotation
  mark) and is not a function word (`NOT_NAMES`) occurs in one of its quotes as
  written (a trailing plural "s" aside), or in the brief;
- ``negation-mismatch``: the sentence negates what its quotes state, or the
  quote negates what the sentence states. A negation cue (`CUES`, or a word
  ending in "n't") governs the words after it up to the end of its clause, at
  most `SCOPE` content words; when most of them are words the other side has
  outside any negation of its own, the two disagree. The quote side is read in
  the quote sentence that shares most words with the sentence, so a quote's
  other sentences do not count against it.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from roles.artifacts import Finding
from roles.corpus import sentence_spans
from roles.sentences import content_words

NUMBER_NOT_IN_QUOTE: Final = "number-not-in-quote"
ENTITY_NOT_IN_QUOTE: Final = "entity-not-in-quote"
NEGATION_MISMATCH: Final = "negation-mismatch"
FLOOR_RULES: Final = frozenset({NUMBER_NOT_IN_QUOTE, ENTITY_NOT_IN_QUOTE, NEGATION_MISMATCH})

NUMBER_WORDS: Final = {
    word: str(value)
    for value, word in enumerate(
        """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
        fifteen sixteen seventeen eighteen nineteen twenty""".split()
    )
    if value
}
# "no one", "one another", "one of": the word names no count.
_NOT_A_COUNT = re.compile(r"\b(?:no\s+one|one\s+another|one\s+of)\b", re.I)
NOT_NAMES: Final = frozenset(
    """The A An This That These Those It Its In On At Of For And But Or Nor As To By With From Into
    Over After Before Since Until While When Where Which Who What How Why If Then Than So Yet
    He She They We You I Our Their His Her My Your Today Also However Here There Some Each Every
    All Both Most Many Much One No Not""".split()
)
CUES: Final = frozenset("no not never none without neither nor nothing nobody nowhere cannot".split())
# A cue followed by one of these quantifies or limits, it does not negate ("not only", "no fewer than").
_NOT_NEGATING_NEXT: Final = frozenset("only just fewer less more later earlier sooner".split())
# Words that close a clause as punctuation does.
_CLAUSE_WORDS: Final = frozenset("but although though while whereas however yet".split())
SCOPE: Final = 4

_DIGITS = re.compile(r"\d+(?:[.,\u00a0\u202f]\d+)*")
_GROUPED = re.compile(r"\d{1,3}(?:[,\u00a0\u202f]\d{3})+(?:\.\d+)?")
_WORDS = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_TOKENS = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*|[,;:.!?()\[\]\u2014\"\u201c\u201d]")
_CLAUSE_MARKS = frozenset(',;:.!?()[]\u2014"\u201c\u201d')
_OPENERS = frozenset(':"\u201c')
_NAME = re.compile(r"(?<![^\W_])([^\W\d_][^\W_]*(?:['\u2019][^\W_]+)*)")


def floor_findings(
    sentence: str, quotes: Sequence[str], brief: str, *, location: str, named: str
) -> list[Finding]:
    """The floor's findings for one cited sentence; `named` names its citations in messages."""
    findings = [
        _error(NUMBER_NOT_IN_QUOTE, location, f"{n!r} is not a number in the quote of {named}")
        for n in missing_numbers(sentence, quotes)
    ]
    findings += [
        _error(ENTITY_NOT_IN_QUOTE, location, f"{name!r} is not in the quote of {named} nor in the brief")
        for name in missing_names(sentence, quotes, brief)
    ]
    clash = negation_clash(sentence, quotes)
    if clash is not None:
        findings.append(_error(NEGATION_MISMATCH, location, f"{clash} (quote of {named})"))
    return findings


# -- numbers --------------------------------------------------------------------------------


def numbers_in(text: str) -> list[tuple[str, str]]:
    """(as written, value) for each number in `text`: digit groups and number words."""
    found = [(m.group(0), _value(m.group(0))) for m in _DIGITS.finditer(text)]
    counted = _NOT_A_COUNT.sub(" ", text)
    found += [
        (w, NUMBER_WORDS[w.casefold()]) for w in _WORDS.findall(counted) if w.casefold() in NUMBER_WORDS
    ]
    return found


def _value(written: str) -> str:
    if _GROUPED.fullmatch(written):
        return re.sub(r"[,\u00a0\u202f]", "", written)
    return written


def missing_numbers(sentence: str, quotes: Iterable[str]) -> list[str]:
    """The sentence's numbers (as written, once each) whose value no quote has."""
    values = {value for quote in quotes for _, value in numbers_in(quote)}
    return list(dict.fromkeys(w for w, value in numbers_in(sentence) if value not in values))


# -- names ----------------------------------------------------------------------------------


def names_in(sentence: str) -> list[str]:
    """Capitalised words that do not open the sentence or a quotation, nor are function words."""
    found: list[str] = []
    text = sentence.strip()
    for m in _NAME.finditer(text):
        word = re.sub(r"['\u2019]s$", "", m.group(1))
        before = text[: m.start()].rstrip()
        opens = not _WORDS.search(before) or (before[-1:] in _OPENERS)
        if opens or len(word) < 2 or not word[0].isupper() or word in NOT_NAMES:
            continue
        found.append(word)
    return list(dict.fromkeys(found))


def missing_names(sentence: str, quotes: Iterable[str], brief: str) -> list[str]:
    """The sentence's names that no quote has as written and the brief does not mention."""
    joined = "\n".join(quotes)
    folded_brief = brief.casefold()
    return [
        name
        for name in names_in(sentence)
        if not any(_has_word(joined, form) for form in _forms(name))
        and not any(_has_word(folded_brief, form.casefold()) for form in _forms(name))
    ]


def _forms(name: str) -> list[str]:
    return [name, name[:-1]] if name.endswith("s") and len(name) > 2 else [name]


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", text) is not None


# -- negation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Negation:
    """A negation cue, the words it governs (stemmed content words) and how it reads."""

    words: frozenset[str]
    shown: str


def negation_clash(sentence: str, quotes: Sequence[str]) -> str | None:
    """Why the sentence and its quotes disagree on a negation; None when they do not."""
    plain = [" ".join(q.split()) for q in quotes]
    quote_sentences = [q[s:e] for q in plain for s, e in sentence_spans(q)] or [""]
    quote_words = {w for q in quote_sentences for w in _content(q)}
    quote_negated = {w for q in quote_sentences for n in _negations(q) for w in n.words}
    for negation in _negations(sentence):
        stated = {w for w in negation.words if w in quote_words and w not in quote_negated}
        if 2 * len(stated) > len(negation.words):
            return f"the sentence says {negation.shown!r} where the quote states it without a negation"
    mine = set(_content(sentence))
    best = max(quote_sentences, key=lambda q: len(mine & set(_content(q))))
    sentence_negated = {w for n in _negations(sentence) for w in n.words}
    for negation in _negations(best):
        stated = {w for w in negation.words if w in mine and w not in sentence_negated}
        if 2 * len(stated) > len(negation.words):
            return f"the quote says {negation.shown!r} where the sentence states it without a negation"
    return None


def _negations(text: str) -> list[_Negation]:
    tokens = _TOKENS.findall(" ".join(text.split()))
    found: list[_Negation] = []
    for i, token in enumerate(tokens):
        if not _is_cue(token) or (i + 1 < len(tokens) and tokens[i + 1].casefold() in _NOT_NEGATING_NEXT):
            continue
        words: list[str] = []
        end = i + 1
        while end < len(tokens) and len(words) < SCOPE:
            nxt = tokens[end]
            if nxt in _CLAUSE_MARKS or nxt.casefold() in _CLAUSE_WORDS:
                break
            if not _is_cue(nxt):
                words += _content(nxt)
            end += 1
        if words:
            found.append(_Negation(frozenset(words), " ".join(tokens[i:end])))
    return found


def _is_cue(token: str) -> bool:
    low = token.casefold().replace("\u2019", "'")
    return low in CUES or low.endswith("n't")


def _content(text: str) -> list[str]:
    """Content words, stemmed, lone letters dropped (numbers kept)."""
    return [_stem(w) for w in content_words(text) if len(w) > 1 or w.isdigit()]


def _stem(word: str) -> str:
    word = word.replace("\u2019", "'")
    word = word[:-2] if word.endswith("'s") else word
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _error(rule: str, location: str, message: str) -> Finding:
    return Finding(rule=rule, location=location, message=message, severity="error")


__all__ = [
    "CUES",
    "ENTITY_NOT_IN_QUOTE",
    "FLOOR_RULES",
    "NEGATION_MISMATCH",
    "NOT_NAMES",
    "NUMBER_NOT_IN_QUOTE",
    "NUMBER_WORDS",
    "floor_findings",
    "missing_names",
    "missing_numbers",
    "names_in",
    "negation_clash",
    "numbers_in",
]

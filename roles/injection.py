"""Spotting source text that reads as instructions to an agent (DESIGN invariant 6).

Tool output is data. A passage that talks to the assistant, tries to change
where or whether something is published, asks for tools or capabilities, or
carries a URL or destination URI that the brief does not mention, is marked
suspicious and is never quoted. `assess()` says why, as reasons of the form
``"rule-name: matched text"``; `rule_of()` reads the rule name back.

The rules are one readable table of named regular expressions, in English,
Spanish, French, German and Chinese (`roles.injection_rules`). They look for
requests aimed at an agent, not for topics, so ordinary prose ("the council
approved the budget", "the library published a newsletter") is not flagged.
They read the text folded by `matchable()`: compatibility forms, case,
invisible characters, look-alike letters from other scripts (Cyrillic ``о``
for ``o``) and accents make no difference. URLs are found in every spelling
a renderer or a reader would follow: with a scheme, protocol-relative
(``//host/x``), scheme-less (``host.example/x``, ``www.host.example``),
markdown link and image targets, and ``src=``/``href=`` attributes.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache
from typing import Final

from orchestrator.harness.textfold import fold, skeleton
from roles.injection_rules import HIDDEN_CHARACTERS, RULES, Rule
from roles.regex_gate import required_all

FOREIGN_URL: Final = "foreign-url"
# Per rule, its parts, each with the sets of words it needs (one of each set; see
# `roles.regex_gate`); a part runs only when every set has a member in the text.
_PARTS: Final = tuple(tuple((part, required_all(part)) for part in rule.alternatives) for rule in RULES)
_LITERALS: Final = tuple(
    sorted({word for parts in _PARTS for _, sets in parts for found in sets for word in found})
)
_SNIPPET = 80
_SMALL_CACHE = 4096


def matchable(text: str) -> tuple[str, list[int]]:
    """`text` as the rules read it, and where each of its characters came from in `text`.

    Folded with `textfold.fold` (NFKC, casefold, invisible characters gone),
    each letter from another script that looks like a Latin letter replaced
    by that letter (its UTS #39 confusable skeleton, read back to ASCII), and
    accents dropped. ``origin[i]`` is the index in `text` of folded character
    ``i`` (plus one end entry), so a match is shown as it was written.
    """
    if text.isascii():
        return text.lower(), list(range(len(text) + 1))
    out: list[str] = []
    origin: list[int] = []
    for i, char in enumerate(text):
        folded = _fold_char(char)
        out.append(folded)
        origin.extend([i] * len(folded))
    origin.append(len(text))
    return "".join(out), origin


@lru_cache(maxsize=_SMALL_CACHE)
def _fold_char(char: str) -> str:
    folded = fold(char)
    if folded.isascii():
        return folded
    shown: list[str] = []
    for c in folded:
        if not c.isascii():
            look = skeleton(c)
            latin = _latin_skeletons().get(look)
            if latin is not None:
                c = latin
            else:
                bare = "".join(x for x in unicodedata.normalize("NFD", c) if not unicodedata.combining(x))
                c = bare or c
        shown.append(c)
    return "".join(shown)


@lru_cache(maxsize=1)
def _latin_skeletons() -> dict[str, str]:
    """Skeleton → the ASCII letter or digit it stands for (``rn`` → ``m``, ``O`` → ``o``)."""
    table: dict[str, str] = {}
    for c in "abcdefghijklmnopqrstuvwxyz0123456789":
        table.setdefault(skeleton(c), c)
    return table


_URL = re.compile(
    r"""(?:\b(?:webhook|git|site):\S+
        |\b(?:https?|ftp|wss?|file|javascript|data|vbscript)://?\S+
        |\b(?:javascript|data|vbscript):\S+
        |\bwww\.[\w-]+\.[^\W\d_]{2,}\S*
        |(?<![\w:/.])//[\w-]+(?:\.[\w-]+)+\S*
        |\b[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}/\S*
        |(?<=\]\()\s*<?[^)\s>]+
        |\b(?:src|href)\s*=\s*["']?[^\s"'>]+)""",
    re.IGNORECASE | re.VERBOSE,
)
# Changes whenever a rule or the URL pattern changes: an index built with other rules is rebuilt.
RULES_VERSION: Final = hashlib.sha256(
    "\n".join(
        [*(f"{r.name}={r.pattern.pattern}={r.taints_source}" for r in RULES), _URL.pattern, "fold-1"]
    ).encode()
).hexdigest()[:16]
_URL_MARKS: Final = (":", "/", "www.", "=", "](")
_URL_TAIL = ".,;:!?)]}>\"'\u201d\u2019*_`"
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def assess(text: str, brief: str = "") -> list[str]:
    """Reasons `text` reads as instructions to an agent; empty when it reads as data.

    URLs and destination URIs are reasons unless they also occur in `brief`.
    """
    reasons, urls = assess_parts(text)
    return reasons + url_reasons(urls, brief)


def assess_parts(text: str) -> tuple[list[str], list[str]]:
    """The brief-independent half of `assess()`: rule reasons, and every URL in `text`.

    ``assess(t, b) == reasons + url_reasons(urls, b)``, so an index can store
    these once per passage and finish the assessment for each brief. A text up
    to `_REMEMBERED_TEXT` characters is assessed once per process (sagas of one
    corpus read, quote and review the same passages again and again).
    """
    if len(text) > _REMEMBERED_TEXT:
        reasons, urls = _assess_parts(text)
    else:
        reasons, urls = _remembered_parts(text)
    return list(reasons), list(urls)


_REMEMBERED_TEXT = 16_384


@lru_cache(maxsize=1024)
def _remembered_parts(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _assess_parts(text)


def _assess_parts(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    reasons: list[str] = []
    folded, origin = matchable(text)
    present = {word for word in _LITERALS if word in folded}
    for rule, parts in zip(RULES, _PARTS, strict=True):
        if rule.name == HIDDEN_CHARACTERS:
            hidden = rule.pattern.search(text)
            if hidden:
                reasons.append(f"{rule.name}: {_snippet(hidden.group())}")
            continue
        found = _leftmost(folded, parts, present)
        if found:
            written = text[origin[found.start()] : origin[found.end() - 1] + 1] if found.end() else ""
            reasons.append(f"{rule.name}: {_snippet(written)}")
    return tuple(reasons), tuple(foreign_urls(text))


def _leftmost(
    folded: str, parts: tuple[tuple[re.Pattern[str], list[frozenset[str]]], ...], present: set[str]
) -> re.Match[str] | None:
    """The match the whole rule pattern would find (leftmost, then the earliest part),
    running only the parts whose required words occur in `folded` (`present`)."""
    best: re.Match[str] | None = None
    for part, needed in parts:
        if any(found.isdisjoint(present) for found in needed):
            continue
        found = part.search(folded)
        if found and (best is None or found.start() < best.start()):
            best = found
    return best


def url_reasons(urls: list[str] | tuple[str, ...], brief: str = "") -> list[str]:
    """`foreign-url` reasons for the URLs (from `assess_parts`) that `brief` does not mention."""
    allowed = _plain(brief)
    return [f"{FOREIGN_URL}: {_snippet(url)}" for url in urls if url not in allowed]


def foreign_urls(text: str, brief: str = "") -> list[str]:
    """URLs and destination URIs in `text` that do not occur in `brief`, in order, once each."""
    allowed = _plain(brief)
    found: list[str] = []
    plain = _plain(text)
    if not any(mark in plain for mark in _URL_MARKS):
        return found  # every URL form needs one of these
    for m in _URL.finditer(plain):
        url = m.group().rstrip(_URL_TAIL)
        if url and url not in allowed and url not in found:
            found.append(url)
    return found


def rule_of(reason: str) -> str:
    """The rule name a reason from `assess()` starts with."""
    return reason.split(":", 1)[0]


def taints_source(reasons: list[str] | tuple[str, ...]) -> bool:
    """Whether these reasons make the whole source untrusted, not only the passage.

    Text that tries to instruct the agent compromises its file; a bare foreign
    URL or an invisible character only disqualifies its own passage.
    """
    tainting = {rule.name for rule in RULES if rule.taints_source}
    return any(rule_of(reason) in tainting for reason in reasons)


def _plain(text: str) -> str:
    """Fold compatibility forms and drop zero-width characters, so spacing tricks do not hide words."""
    return unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH).translate(_DOTS)


def _snippet(matched: str) -> str:
    """The matched text on one line, invisible characters spelled as code points."""
    shown = "".join(
        f"U+{ord(c):04X}" if unicodedata.category(c) in ("Cf", "Cc") and not c.isspace() else c
        for c in matched
    )
    flat = " ".join(shown.split())
    return flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 3] + "..."


__all__ = [
    "FOREIGN_URL",
    "HIDDEN_CHARACTERS",
    "RULES",
    "RULES_VERSION",
    "Rule",
    "assess",
    "assess_parts",
    "foreign_urls",
    "matchable",
    "rule_of",
    "taints_source",
    "url_reasons",
]

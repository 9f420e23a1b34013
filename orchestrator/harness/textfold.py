"""Text folding for comparisons a person cannot see the difference in. No I/O.

Total functions (any ``str`` in, never an error):

``fold(text)``
    NFKC, then casefold, with control, format and other invisible characters
    removed: zero-width space and joiners, bidi marks and embeddings, the soft
    hyphen, variation selectors, tag characters, fillers. ``fold("Bob")``,
    ``fold("bob\\u200b")`` and ``fold("ｂｏｂ")`` are all ``"bob"``. It keeps
    visible letters as they are: Cyrillic ``о`` stays Cyrillic.

``skeleton(text)``
    The confusable skeleton of UTS #39 section 4 applied to ``fold(text)``:
    NFD, each character replaced by its prototype from Unicode's
    ``confusables.txt``, NFD again. Two strings with one skeleton look alike
    to a reader: ``skeleton("bоb")`` (Cyrillic ``о``) equals
    ``skeleton("bob")``. A skeleton is for comparing, never for showing.
    Because it folds case first, a rule of the table for a capital letter
    (capital ``I`` → ``l``) never applies here: see ``lookalike_keys``.

``lookalike_keys(text)``
    The keys two names are compared by: ``{skeleton(text), skeleton(fold(S))}``
    where ``S`` is the UTS #39 skeleton of the NFKC form *as written* (before
    any case folding). The first key makes case and the lower-case look-alikes
    one (``Bob``, ``bоb``); the second applies the table's rules for capitals
    and digits that a reader sees (``aIice`` with a capital i, ``AIice``,
    Greek ``Ι``, ``b0b`` with a zero are ``alice`` and ``bob``). Two names look
    alike when their key sets meet (``looks_alike``). The first key is what
    the users table stores as ``skeleton`` and what open-mode ids are made
    from, so it keeps its meaning.

The confusables data is the table shipped by the ``confusable_homoglyphs``
package (Unicode's ``confusables.txt`` as JSON). That table lists each pair in
both directions; the direction (which side is the prototype) is recovered
as follows: a prototype is never itself a source, and a source has exactly one
target, so a character with several partners, or whose single partner is a
sequence or has several partners itself, is resolved accordingly; a pair of
two single characters that only name each other is one class of two, and both
map to the smaller code point (the same equality as the standard's mapping).
The package data is read once, on the first call to ``skeleton``.
"""

from __future__ import annotations

import json
import unicodedata
from functools import cache
from importlib import resources

# Default-ignorable code points that are not in category Cf (those are all
# removed by category): combining grapheme joiner, Hangul fillers, Khmer
# inherent vowels, Mongolian free variation selectors, variation selectors.
_INVISIBLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE0FFF),
)
_BIDI_MARKS = "\u200e\u200f"


def _invisible(ch: str) -> bool:
    if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") and ch not in "\t\n":
        return True
    code = ord(ch)
    return any(low <= code <= high for low, high in _INVISIBLE_RANGES)


def _strip_invisible(text: str) -> str:
    return "".join(ch for ch in text if not _invisible(ch))


def fold(text: str) -> str:
    """NFKC + casefold, without control or invisible characters."""
    folded = unicodedata.normalize("NFKC", _strip_invisible(text)).casefold()
    # casefold can leave a string that is not NFKC (and NFKC can surface a
    # format character), so settle both once more.
    return _strip_invisible(unicodedata.normalize("NFKC", folded))


@cache
def _prototypes() -> dict[str, str]:
    raw = resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    partners: dict[str, list[str]] = {}
    for key, entries in json.loads(raw).items():
        clean = key.strip(_BIDI_MARKS)
        partners.setdefault(clean, []).extend(e["c"].strip(_BIDI_MARKS) for e in entries)
    mapping: dict[str, str] = {}
    for char, seen in partners.items():
        if len(char) != 1 or len(set(seen)) != 1:
            continue  # a sequence, or a prototype with several sources
        other = seen[0]
        if len(other) != 1 or len(set(partners.get(other, []))) > 1:
            mapping[char] = other
        else:
            mapping[char] = min(char, other)
    return mapping


def _map(text: str) -> str:
    table = _prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(table.get(ch, ch) for ch in decomposed))


def skeleton(text: str) -> str:
    """The UTS #39 confusable skeleton of ``fold(text)``."""
    return _map(fold(text))


def cased_skeleton(text: str) -> str:
    """The skeleton of the name as written (NFKC, no invisibles, case kept), then folded and
    skeletoned again: the capital-letter rules of the table apply before case is lost."""
    as_written = unicodedata.normalize("NFKC", _strip_invisible(text))
    return skeleton(_map(as_written))


def lookalike_keys(text: str) -> frozenset[str]:
    """The keys `text` is compared by (see the module docstring)."""
    return frozenset({skeleton(text), cased_skeleton(text)})


def looks_alike(a: str, b: str) -> bool:
    """Whether a reader could take `a` for `b`: their look-alike keys meet."""
    return not lookalike_keys(a).isdisjoint(lookalike_keys(b))


__all__ = ["cased_skeleton", "fold", "lookalike_keys", "looks_alike", "skeleton"]

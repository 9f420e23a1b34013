"""What came from where in a version: each quote with its source and the screen's verdict.

`origins(markdown, citations, brief)` reads a version as the reviewer does
(`roles.reviewing.parse_blocks`, and each paragraph split into the sentences
`roles.sentences.claims` numbers) and returns, in reading order, one
`Origin` row per citation (at the first sentence that carries its
marker: the marker, the verbatim quote, the source path relative to the
corpus and its digest) and one row per sentence that carries no marker
(the writer's or a person's own words: "written, not quoted"). Citations no
sentence carries follow at the end. Every row holds the injection screen's
verdict on its text (`roles.injection.assess` against the saga's brief):
no reasons means the screen found nothing, which is not a guarantee that
there is nothing to find (the screen is a detector with misses).

`origins_of(version, brief)` does the same for a version as `show` returns it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from roles.injection import assess
from roles.reviewing import markers_in, parse_blocks
from roles.sentences import claims

QUOTED: Final = "quoted"
WRITTEN: Final = "written"
CLEAN: Final = "clean"
NOT_QUOTED: Final = "written, not quoted"
SHORT_DIGEST: Final = 12


@dataclass(frozen=True)
class Origin:
    """One row of "What came from where".

    `kind` is `quoted` (a citation: `marker`, `source`, `source_digest` set,
    `text` is the verbatim quote) or `written` (a sentence with no marker:
    `text` is the sentence, `where` its place such as ``paragraph 2 sentence 3``).
    `reasons` are the screen's; empty when it found nothing.
    """

    kind: Literal["quoted", "written"]
    text: str
    marker: str = ""
    source: str = ""
    source_digest: str = ""
    where: str = ""
    reasons: tuple[str, ...] = ()

    @property
    def flagged(self) -> bool:
        return bool(self.reasons)

    @property
    def short_digest(self) -> str:
        return self.source_digest[:SHORT_DIGEST]

    @property
    def verdict(self) -> str:
        """`clean`, or the screen's reasons joined (flagged)."""
        return "; ".join(self.reasons) if self.reasons else CLEAN

    @property
    def origin(self) -> str:
        """Where the text came from: its source path, or `written, not quoted`."""
        return self.source if self.kind == QUOTED else NOT_QUOTED


def _quoted(citation: Mapping[str, Any], brief: str, where: str) -> Origin:
    quote = str(citation.get("quote") or "")
    return Origin(
        kind=QUOTED,
        text=quote,
        marker=str(citation.get("marker") or ""),
        source=str(citation.get("source") or ""),
        source_digest=str(citation.get("source_digest") or ""),
        where=where,
        reasons=tuple(assess(quote, brief)),
    )


def origins(markdown: str, citations: Sequence[Mapping[str, Any]], brief: str) -> list[Origin]:
    """Each citation and each unmarked sentence of `markdown`, in reading order, with its verdict."""
    by_marker: dict[str, Mapping[str, Any]] = {}
    for citation in citations:
        by_marker.setdefault(str(citation.get("marker") or ""), citation)
    rows: list[Origin] = []
    shown: set[str] = set()
    for block in parse_blocks(markdown):
        if block.kind != "paragraph":
            continue  # headings are titles; the Sources list repeats the citations
        # A quote of several sentences carries its marker after the last one: the sentences
        # before it are that quote's, not words written around it.
        quotes = [
            " ".join(str(by_marker[m].get("quote") or "").split())
            for m in markers_in(block.text)
            if m in by_marker
        ]
        for claim in claims(block.text):
            where = f"paragraph {block.number} sentence {claim.number}"
            known = [m for m in claim.markers if m in by_marker]
            if not known:
                said = " ".join(claim.text.split())
                if said and not any(said in quote for quote in quotes):
                    rows.append(
                        Origin(WRITTEN, claim.text, where=where, reasons=tuple(assess(claim.text, brief)))
                    )
                continue
            for marker in known:
                if marker not in shown:
                    shown.add(marker)
                    rows.append(_quoted(by_marker[marker], brief, where))
    for marker, citation in by_marker.items():
        if marker not in shown:
            shown.add(marker)
            rows.append(_quoted(citation, brief, "not cited in the text"))
    return rows


def origins_of(version: Mapping[str, Any], brief: object) -> list[Origin]:
    """`origins` of a version as `services.show` returns it."""
    return origins(str(version.get("markdown") or ""), list(version.get("citations") or []), str(brief or ""))


__all__ = ["CLEAN", "NOT_QUOTED", "QUOTED", "WRITTEN", "Origin", "origins", "origins_of"]

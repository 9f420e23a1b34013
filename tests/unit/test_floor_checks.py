"""The review's floor: numbers, names and negations a cited sentence may not add to its quotes.

The sentences of the reported cases passed the lexical support check (most of
their words are in the quote) while saying the opposite of it; the floor flags
them through `review()` against the real sample corpus, and flags nothing a
source itself says.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

import roles
from roles.artifacts import Citation, ReviewReport
from roles.corpus import load_corpus, split_passages
from roles.floor_checks import (
    FLOOR_RULES,
    floor_findings,
    missing_names,
    missing_numbers,
    names_in,
    negation_clash,
    numbers_in,
)
from roles.reviewing import cited_sentences, review
from roles.sentences import claims, states_something

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"
EVAL = Path(roles.__file__).parents[1] / "examples" / "eval"
BRIEF = "Write a short history of the Millbrook public library network, its branches and the bookmobile."
LOCATIONS = "The network has four fixed locations and one bookmobile."
COUNCIL = (
    "The city council took over the reading room in 1902 and created the Millbrook Public Library "
    "as a city department."
)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(SAMPLE, root)
    return root


def _review(corpus: Path, sentence: str, quote: str) -> ReviewReport:
    digest = hashlib.sha256((corpus / "overview.md").read_bytes()).hexdigest()
    citation = Citation(marker="[1]", source="overview.md", quote=quote, source_digest=digest)
    markdown = f"# Millbrook\n\n{sentence} [1]\n\n## Sources\n\n- [1] overview.md\n"
    return review(markdown, (citation,), corpus_root=corpus, brief=BRIEF, version_digest="v" * 64)


def _floor(report: ReviewReport) -> list[tuple[str, str]]:
    return [(f.rule, f.location) for f in report.findings if f.rule in FLOOR_RULES]


@pytest.mark.parametrize(
    ("sentence", "quote", "token"),
    [
        ("The network has no fixed locations and no bookmobile.", LOCATIONS, "no fixed locations"),
        ("The city council never took over the reading room in 1902.", COUNCIL, "never took over"),
    ],
)
def test_the_reported_sentences_are_contradicted_by_their_true_quotes(
    corpus: Path, sentence: str, quote: str, token: str
) -> None:
    report = _review(corpus, sentence, quote)
    assert report.verdict == "changes_requested"
    assert _floor(report) == [("negation-mismatch", "paragraph 1 sentence 1")]
    [finding] = [f for f in report.findings if f.rule == "negation-mismatch"]
    assert token in finding.message
    # The lexical check alone let them through: the floor is what catches them.
    assert "unsupported-sentence" not in {f.rule for f in report.findings}


@pytest.mark.parametrize(
    ("sentence", "quote", "rule", "token"),
    [
        ("The network has five fixed locations and one bookmobile.", LOCATIONS, "number-not-in-quote", "'five'"),
        ("The Riverside network has four fixed locations and one bookmobile.", LOCATIONS, "entity-not-in-quote", "'Riverside'"),
        ("The city council took over the reading room in 1902 with the help of Carnegie.", COUNCIL, "entity-not-in-quote", "'Carnegie'"),
    ],
)  # fmt: skip
def test_a_number_or_a_name_its_quote_lacks_is_flagged(
    corpus: Path, sentence: str, quote: str, rule: str, token: str
) -> None:
    report = _review(corpus, sentence, quote)
    assert report.verdict == "changes_requested"
    flagged = [f for f in report.findings if f.rule == rule]
    assert [f.location for f in flagged] == ["paragraph 1 sentence 1"]
    assert token in flagged[0].message


@pytest.mark.parametrize(
    ("sentence", "quote"),
    [
        (LOCATIONS, LOCATIONS),
        ("The city council took over the reading room in 1902.", COUNCIL),
        # A name of the brief (Millbrook) need not be in the quote.
        ("The Millbrook network has four fixed locations and one bookmobile.", LOCATIONS),
    ],
)
def test_true_sentences_pass(corpus: Path, sentence: str, quote: str) -> None:
    report = _review(corpus, sentence, quote)
    assert report.verdict == "pass", report.findings


def test_numbers_compare_as_values() -> None:
    assert [v for _, v in numbers_in("about 1,500 books, four rooms and 3.5 staff in 1902")] == [
        "1500",
        "3.5",
        "1902",
        "4",
    ]
    assert missing_numbers("It held 1,500 books in four rooms.", ["It held 1500 books in 4 rooms."]) == []
    assert missing_numbers("It held 1,600 books in five rooms.", ["It held 1500 books in 4 rooms."]) == [
        "1,600",
        "five",
    ]
    # "one of", "no one": no count is stated.
    assert missing_numbers("It is one of the oldest; no one knows.", ["It is among the oldest."]) == []


def test_names_skip_the_sentence_start_quotations_and_function_words() -> None:
    assert names_in("Today The Friends of Millbrook met: Ada said so.") == ["Friends", "Millbrook"]
    assert names_in('He wrote "Riverside Days" in Paris.') == ["Days", "Paris"]
    assert missing_names("The sale funds the Riverside Branch.", ["the Riverside branch"], "") == ["Branch"]
    assert missing_names("Open on Fridays at Riverside.", ["open every Friday"], "riverside notes") == []


def test_a_negation_counts_where_it_governs_the_shared_words() -> None:
    # The quote negates what the sentence states.
    assert negation_clash("The branch opens on Sundays.", ["The branch does not open on Sundays."])
    assert negation_clash("The branch opens on Sundays.", ["The branch doesn't open on Sundays."])
    # Another sentence of the quote negates something else: no clash.
    quote = "The library does not lend e-readers. The library lends books to residents."
    assert negation_clash("The library lends books.", [quote]) is None
    assert (
        negation_clash("The network has four fixed locations.", [LOCATIONS + " It does not charge fees."])
        is None
    )
    # Both negate the same words; "not only" and "no fewer than" negate nothing.
    assert (
        negation_clash("The branch is not open on Sundays.", ["The branch is not open on Sundays."]) is None
    )
    assert negation_clash("It lends not only books but films.", ["It lends books and films."]) is None
    assert negation_clash("It held no fewer than 600 books.", ["It held 600 books."]) is None


def test_floor_findings_name_the_rule_location_and_citation() -> None:
    findings = floor_findings(
        "In Riverside, the network never had 5 fixed locations.",
        [LOCATIONS],
        "",
        location="paragraph 2 sentence 1",
        named="[3]",
    )
    assert {f.rule for f in findings} == FLOOR_RULES
    assert all(f.location == "paragraph 2 sentence 1" and "[3]" in f.message for f in findings)
    assert all(f.severity == "error" for f in findings)


def test_no_sentence_of_a_shipped_corpus_is_flagged_against_its_own_passage() -> None:
    roots = [SAMPLE, *sorted(p / "corpus" for p in EVAL.iterdir() if (p / "corpus").is_dir())]
    checked = 0
    for root in roots:
        for file in load_corpus(root).files:
            for passage in split_passages(file):
                for claim in claims(passage.text):
                    if states_something(claim.text):
                        checked += 1
                        found = floor_findings(claim.text, [passage.text], "", location="x", named="[1]")
                        assert found == [], (file.path, claim.text, found)
    assert checked > 200


def test_cited_sentences_number_the_sentences_a_reviewer_judges() -> None:
    digest = "d" * 64
    citations = (
        Citation(marker="[1]", source="a.md", quote="One.", source_digest=digest),
        Citation(marker="[2]", source="b.md", quote="Two.", source_digest=digest),
    )
    markdown = (
        "# T\n\nFirst claim here [1]. Second claim [1] [2].\n\n## Part\n\nA third one [2].\n\n## Sources\n"
    )
    found = cited_sentences(markdown, citations)
    assert [(s.index, s.location, s.text) for s in found] == [
        (1, "paragraph 1 sentence 1", "First claim here."),
        (2, "paragraph 1 sentence 2", "Second claim."),
        (3, "paragraph 2 sentence 1", "A third one."),
    ]
    assert [c.marker for c in found[1].citations] == ["[1]", "[2]"]

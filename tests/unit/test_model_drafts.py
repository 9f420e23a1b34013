"""A writer model's own draft: the checks `draft.write` runs before it stores it, and the
goals model roles are given. Sources are the sample corpus, read for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

import roles
from orchestrator.core.errors import InvalidInput
from roles.artifacts import Citation, Evidence, Finding, SourceFile
from roles.corpus import load_corpus, read_source
from roles.model_drafts import MAX_MARKDOWN_CHARS, CitationArg, OwnDraft, checked_draft
from roles.model_goals import (
    MAX_GOAL_CHARS,
    base_goal,
    evidence_notes,
    instructions,
    reviewer_goal,
    writer_goal,
)
from roles.ranking import collect_evidence
from roles.tools import DraftArgs, _draft_key

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"
BRIEF = "history of the bookmobile and the riverside branch"
OPENED = (
    "The Riverside Branch opened in 1958 in a former railway freight office near the Millbrook river docks."
)
FLOOD = "About 4,000 books were lost, and the branch reopened eleven months later after the floor was raised by one metre."
SAGA = "saga-1"


def read(source: str) -> SourceFile:
    return read_source(SAMPLE, source)


@pytest.fixture(scope="module")
def evidence() -> Evidence:
    return collect_evidence(BRIEF, load_corpus(SAMPLE))


def cite(
    marker: str, quote: str, source: str = "riverside-branch.md", digest: str | None = None
) -> CitationArg:
    return CitationArg(marker=marker, source=source, source_digest=digest or read(source).digest, quote=quote)


def own(markdown: str, *citations: CitationArg, title: str = "Riverside") -> OwnDraft:
    return OwnDraft(title=title, markdown=markdown, citations=citations)


def check(draft: OwnDraft, evidence: Evidence, link_hosts: frozenset[str] = frozenset()) -> str:
    with pytest.raises(InvalidInput) as refused:
        checked_draft(draft, evidence, brief=BRIEF, read=read, link_hosts=link_hosts)
    return str(refused.value)


GOOD = f"# Riverside\n\nThe branch opened in 1958 near the docks [1]. {FLOOD} [2]\n\n## Sources\n\n- [1] riverside-branch.md\n"


def test_a_cited_draft_in_the_models_words_is_stored_as_written(evidence: Evidence) -> None:
    draft = checked_draft(
        own(GOOD, cite("[1]", OPENED), cite("[2]", FLOOD)), evidence, brief=BRIEF, read=read
    )
    assert draft.markdown == GOOD and draft.title == "Riverside"
    assert draft.citations == (
        Citation(
            marker="[1]",
            source="riverside-branch.md",
            quote=OPENED,
            source_digest=read("riverside-branch.md").digest,
        ),
        Citation(
            marker="[2]",
            source="riverside-branch.md",
            quote=FLOOD,
            source_digest=read("riverside-branch.md").digest,
        ),
    )


def test_an_invented_quote_is_refused_naming_the_citation_the_source_and_the_digest(
    evidence: Evidence,
) -> None:
    digest = read("riverside-branch.md").digest
    reason = check(own(GOOD, cite("[1]", OPENED), cite("[2]", "About 40,000 books were lost.")), evidence)
    assert reason == f"citation [2]: the quote is not in riverside-branch.md at {digest[:6]}…"


def test_a_quote_must_be_byte_exact_not_merely_close(evidence: Evidence) -> None:
    respaced = FLOOD.replace("books were", "books  were")
    assert "the quote is not in riverside-branch.md" in check(
        own(GOOD, cite("[1]", OPENED), cite("[2]", respaced)), evidence
    )


def test_a_source_the_evidence_does_not_hold_is_refused(evidence: Evidence) -> None:
    invented = cite("[2]", FLOOD, source="archive/unpublished-memoir.md", digest="a" * 64)
    reason = check(own(GOOD, cite("[1]", OPENED), invented), evidence)
    assert reason == "citation [2]: archive/unpublished-memoir.md is not one of the evidence's sources"


def test_a_digest_the_evidence_does_not_hold_is_refused(evidence: Evidence) -> None:
    reason = check(own(GOOD, cite("[1]", OPENED), cite("[2]", FLOOD, digest="b" * 64)), evidence)
    assert (
        reason.startswith("citation [2]: the evidence holds riverside-branch.md at ")
        and "not at bbbbbb…" in reason
    )


def test_a_source_changed_since_the_evidence_is_refused(evidence: Evidence, tmp_path: Path) -> None:
    changed = read("riverside-branch.md").text.replace("1958", "1959")
    (tmp_path / "riverside-branch.md").write_text(changed, encoding="utf-8")
    with pytest.raises(
        InvalidInput, match=r"citation \[1\]: riverside-branch.md has changed since [0-9a-f]{6}…"
    ):
        checked_draft(
            own(GOOD, cite("[1]", OPENED), cite("[2]", FLOOD)),
            evidence,
            brief=BRIEF,
            read=lambda source: read_source(tmp_path, source),
        )


@pytest.mark.parametrize(
    ("markdown", "reason"),
    [
        (
            f"# R\n\nThe branch opened in 1958 near the docks [1]. It flooded in 1979.\n\n{FLOOD} [2]\n",
            "paragraph 1 sentence 2 states something without a citation marker: 'It flooded in 1979.'",
        ),
        (f"# R\n\nThe branch opened in 1958 [1]. {FLOOD} [3]\n", "paragraph 1: marker [3] has no citation"),
        (
            "# R\n\nThe branch opened in 1958 [1].\n\n## Sources\n\n- [2] riverside-branch.md\n",
            "citation [2]: no paragraph carries [2]",
        ),
        (
            "# R\n\nThe branch opened in 1958 [1].\n\n## Sources\n\n- [5] x.md\n",
            "reference 1: marker [5] has no citation",
        ),
    ],
)
def test_markers_and_citations_must_match_and_every_statement_is_cited(
    evidence: Evidence, markdown: str, reason: str
) -> None:
    assert check(own(markdown, cite("[1]", OPENED), cite("[2]", FLOOD)), evidence) == reason


def test_the_sentences_of_a_multi_sentence_quote_need_only_its_last_marker(evidence: Evidence) -> None:
    two = (
        "The Riverside Branch opened in 1958 in a former railway freight office near the Millbrook river "
        "docks. It was the first branch library in the city."
    )
    draft = checked_draft(own(f"# R\n\n{two} [1]\n", cite("[1]", two)), evidence, brief=BRIEF, read=read)
    assert draft.citations[0].quote == two


def test_a_question_or_a_heading_needs_no_marker(evidence: Evidence) -> None:
    markdown = "# Riverside\n\n## When did it open?\n\nWhen did it open? In 1958 [1].\n"
    assert (
        checked_draft(own(markdown, cite("[1]", OPENED)), evidence, brief=BRIEF, read=read).markdown
        == markdown
    )


def test_a_marker_cited_twice_is_refused(evidence: Evidence) -> None:
    assert (
        check(own(GOOD, cite("[1]", OPENED), cite("[1]", FLOOD)), evidence)
        == "citation [1]: the marker is cited twice"
    )


def test_links_outside_the_allowed_hosts_are_refused_anywhere(evidence: Evidence) -> None:
    linked = GOOD.replace("near the docks", "near the [docks](https://evil.example/x)")
    assert check(own(linked, cite("[1]", OPENED), cite("[2]", FLOOD)), evidence).startswith(
        "the markdown links outside the allowed hosts: link https://evil.example/x"
    )
    titled = own(GOOD, cite("[1]", OPENED), cite("[2]", FLOOD), title="See evil.example/page")
    assert check(titled, evidence).startswith("the title links outside the allowed hosts")
    allowed = checked_draft(
        own(linked, cite("[1]", OPENED), cite("[2]", FLOOD)),
        evidence,
        brief=BRIEF,
        read=read,
        link_hosts=frozenset({"evil.example"}),
    )
    assert "https://evil.example/x" in allowed.markdown


def test_a_quote_from_a_passage_set_aside_is_refused(evidence: Evidence) -> None:
    flagged = evidence.model_copy(
        update={"suspicious": (*evidence.suspicious, evidence.passages[0].model_copy(update={"text": FLOOD}))}
    )
    reason = check(own(GOOD, cite("[1]", OPENED), cite("[2]", FLOOD)), flagged)
    assert reason == "citation [2]: the quote is from a passage the research set aside as suspicious"


def test_sizes_are_bounded_by_the_schema_and_by_the_check(evidence: Evidence) -> None:
    with pytest.raises(ValidationError, match="at most 20000 characters"):
        OwnDraft(title="T", markdown="x" * (MAX_MARKDOWN_CHARS + 1), citations=())
    with pytest.raises(ValidationError, match="come together"):
        OwnDraft(markdown=GOOD)
    assert check(own(GOOD), evidence).startswith("the draft has no citations")
    assert check(own(GOOD, cite("[1]", OPENED), title="two\nlines"), evidence).startswith(
        "the title must be one line"
    )


def test_the_key_covers_the_models_draft_and_leaves_the_deterministic_key_as_it_was() -> None:
    base = {"saga_id": SAGA, "evidence_digest": "e" * 64, "round": 1}
    deterministic = DraftArgs.model_validate(base)
    assert _draft_key(deterministic) == f"draft-{SAGA}-{'e' * 16}-1--"
    citation = {"marker": "[1]", "source": "a.md", "source_digest": "a" * 64, "quote": "A quote."}
    first = DraftArgs.model_validate(
        {**base, "title": "T", "markdown": "A quote. [1]", "citations": [citation]}
    )
    second = DraftArgs.model_validate(
        {**base, "title": "T", "markdown": "A quote! [1]", "citations": [citation]}
    )
    assert _draft_key(first).startswith(_draft_key(deterministic) + "-")
    assert len({_draft_key(deterministic), _draft_key(first), _draft_key(second)}) == 3
    assert _draft_key(first) == _draft_key(DraftArgs.model_validate(first.model_dump()))


def test_the_writer_goal_is_one_json_object_with_notes_that_are_exact_slices(evidence: Evidence) -> None:
    goal = writer_goal(
        base_goal("writer", "draft", SAGA, BRIEF),
        evidence_digest="e" * 64,
        round=1,
        evidence=evidence,
        findings=[Finding(rule="unsupported-sentence", location="paragraph 1 sentence 2", message="m")],
        note="Drop [2].",
        review_digest="r" * 64,
    )
    body = json.loads(goal.text())
    assert list(body) == [
        "role",
        "role_name",
        "saga_id",
        "brief",
        "evidence_digest",
        "round",
        "notes",
        "findings",
        "note",
        "review_digest",
    ]
    assert body["role"] == "writer" and body["role_name"] == "draft" and body["note"] == "Drop [2]."
    assert body["findings"] == [
        {"rule": "unsupported-sentence", "location": "paragraph 1 sentence 2", "message": "m"}
    ]
    assert body["notes"] and goal.left_out == ()
    for note in body["notes"]:
        source = read(note["source"])
        assert note["quote"] in source.text and note["source_digest"] == source.digest
    assert {
        "source": "riverside-branch.md",
        "source_digest": read("riverside-branch.md").digest,
        "quote": OPENED,
    } in body["notes"]


def test_a_goal_stays_within_its_bound_and_says_what_it_left_out(evidence: Evidence) -> None:
    many = evidence.model_copy(update={"passages": evidence.passages * 40})
    shelves = " and ".join(["a shelf of local history books"] * 25)  # about 800 characters a sentence
    long_text = " ".join(f"Sentence {i} says the branch had {shelves}." for i in range(60))
    sentences = evidence.model_copy(
        update={"passages": (evidence.passages[0].model_copy(update={"text": long_text}),)}
    )
    goal = writer_goal(
        base_goal("writer", "w", SAGA, "b" * 10_000), evidence_digest="e" * 64, round=0, evidence=sentences
    )
    assert len(goal.text()) <= MAX_GOAL_CHARS and len(json.loads(goal.text())["brief"]) == 2000
    kept = len(json.loads(goal.text())["notes"])
    assert 0 < kept < 40 and goal.left_out == (f"{60 - kept} notes",)  # the size, not the count, bound it
    assert "leaves out" in instructions("writer", "w", "version", goal.left_out)
    assert len(evidence_notes(many)) == len(evidence_notes(evidence))  # each sentence once


def test_the_reviewer_goal_numbers_the_cited_sentences_as_review_record_does() -> None:
    digest = read("riverside-branch.md").digest
    citations = [
        Citation(marker="[1]", source="riverside-branch.md", quote=OPENED, source_digest=digest),
        Citation(marker="[2]", source="riverside-branch.md", quote=FLOOD, source_digest=digest),
    ]
    goal = reviewer_goal(
        base_goal("reviewer", "check", SAGA, BRIEF),
        version=2,
        version_digest="v" * 64,
        markdown=GOOD,
        citations=citations,
    )
    body = json.loads(goal.text())
    assert body["version"] == 2 and body["version_digest"] == "v" * 64
    assert [(s["index"], s["text"], [c["marker"] for c in s["citations"]]) for s in body["sentences"]] == [
        (1, "The branch opened in 1958 near the docks.", ["[1]"]),
        (2, FLOOD, ["[2]"]),
    ]
    assert body["sentences"][0]["citations"][0] == citations[0].model_dump(mode="json")

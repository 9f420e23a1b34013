"""The evaluation cases in examples/eval, run through researcher, writer and reviewer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roles.corpus import load_corpus
from roles.ranking import collect_evidence
from roles.reviewing import review
from roles.writing import NothingToWrite, write_draft

pytestmark = pytest.mark.unit

EVAL = Path(__file__).resolve().parents[2] / "examples" / "eval"
CASES = sorted(p.name for p in EVAL.iterdir() if (p / "expect.json").is_file())


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 5


@pytest.mark.parametrize("name", CASES)
def test_eval_case(name: str) -> None:
    case = EVAL / name
    brief = (case / "brief.txt").read_text(encoding="utf-8").strip()
    expect: dict[str, Any] = json.loads((case / "expect.json").read_text(encoding="utf-8"))
    corpus = case / "corpus"

    evidence = collect_evidence(brief, load_corpus(corpus))

    assert evidence.files_read == expect["files_read"]
    assert {p.source for p in evidence.suspicious} == set(expect["suspicious_sources"])
    skipped = {s.path: s.reason for s in evidence.skipped}
    assert set(skipped) == set(expect["skipped"])
    for path, fragment in expect["skipped"].items():
        assert fragment in skipped[path]

    if expect["outcome"] == "nothing-to-write":
        with pytest.raises(NothingToWrite):
            write_draft(brief, evidence)
        return

    assert expect["outcome"] == "pass"
    draft = write_draft(brief, evidence)
    report = review(
        draft.markdown,
        draft.citations,
        corpus_root=corpus,
        brief=brief,
        version_digest=draft.digest(),
        suspicious_texts=[p.text for p in evidence.suspicious],
    )
    assert report.verdict == "pass", report.findings
    assert len(draft.citations) >= expect["min_citations"]
    published = draft.markdown + "".join(c.quote for c in draft.citations)
    for banned in expect.get("never_in_draft", []):
        assert banned not in published
    assert not {c.source for c in draft.citations} & set(expect.get("never_cited", []))

"""The corpus index dates its refreshes by the clock it is given (the application's, the
database's time), the clock a saga's submit time is read on; never this host's wall clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.core.clock import ManualClock
from roles.index import CorpusIndexes

SUBMITTED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)  # long before this host's wall clock


def test_a_refresh_is_dated_and_judged_on_the_indexes_clock(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nThe library network opened a branch.\n", encoding="utf-8")
    clock = ManualClock(SUBMITTED - timedelta(seconds=5))
    index = CorpusIndexes(tmp_path / "index", clock=clock).for_corpus(corpus)
    assert index.refresh().started_at == clock.now()
    assert index.refresh_unless_since(SUBMITTED) is not None, "a walk before the submit does not count"
    clock.advance(10)
    index.refresh()
    assert index.refresh_unless_since(SUBMITTED) is None, "a walk after the submit does"

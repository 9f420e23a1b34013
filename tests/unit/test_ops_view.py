"""The `/ops` page's pure parts: ages as people read them, and what a stuck saga waits on."""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.reads.ops_view import age_text, aware, waiting_on


def test_ages_read_in_the_largest_units_that_matter() -> None:
    assert age_text(0) == "0s"
    assert age_text(59.9) == "59s"
    assert age_text(65) == "1m 05s"
    assert age_text(3 * 3600 + 12 * 60 + 5) == "3h 12m"
    assert age_text(2 * 86400 + 4 * 3600 + 59) == "2d 4h"
    assert age_text(-30) == "0s"  # a clock a little ahead never shows a negative age


def test_a_naive_database_time_is_utc() -> None:
    naive = datetime(2026, 1, 2, 3, 4, 5)
    assert aware(naive) == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    already = datetime(2026, 1, 2, tzinfo=UTC)
    assert aware(already) is already


def test_open_work_comes_first_then_open_steps_then_the_state() -> None:
    steps = [("site:/a", "pending"), ("webhook:http://h", "uncertain")]
    assert waiting_on("executing", "pressroom.publisher.publish", steps) == "work pressroom.publisher.publish"
    assert waiting_on("executing", None, steps) == "site:/a (pending); webhook:http://h (uncertain)"
    assert waiting_on("ready-for-review", None, []) == "a reviewer's decision"
    assert waiting_on("effect-unknown", None, []) == "a person's reconcile"
    assert waiting_on("preparing", None, []).startswith("no open work or step")

"""The saga timeline's layout (orchestrator.entrypoints.web.timeline): to scale, with the approval wait cut out."""

from __future__ import annotations

import pytest

from orchestrator.entrypoints.web.timeline import BREAK_PX, Interval, cut_gaps, human, layout


def _work() -> list[Interval]:
    """Research and drafting in the first 100 ms, a 10-minute approval wait, a 40 ms publish."""
    return [
        Interval("research", "proposal", 0, 10),
        Interval("research", "send", 10, 30),
        Interval("draft", "queue", 30, 40, elastic=True),
        Interval("draft", "ack", 40, 100),
        Interval("approval", "approval", 100, 600_100, elastic=True),
        Interval("publish", "proposal", 600_100, 600_110),
        Interval("publish", "send", 600_110, 600_140),
    ]


def test_the_approval_wait_is_cut_out_of_the_axis() -> None:
    assert cut_gaps(_work()) == [(100, 600_100)]
    drawn = layout(_work(), width=800)
    assert len(drawn.breaks) == 1
    assert drawn.breaks[0].hidden_ms == 600_000 and drawn.breaks[0].label == "10 min 0 s"
    assert drawn.total_ms == 600_140


def test_work_is_drawn_to_one_scale_on_both_sides_of_the_break() -> None:
    drawn = layout(_work(), width=800)
    bars = {(drawn.rows[b.row][0], b.kind): b for b in drawn.bars}
    per_ms = bars[("research", "send")].width / 20
    assert bars[("research", "proposal")].width == pytest.approx(10 * per_ms)
    assert bars[("draft", "ack")].width == pytest.approx(60 * per_ms)
    assert bars[("publish", "send")].width == pytest.approx(30 * per_ms)
    # The publish starts one break after the drafting ended: nothing else is between them.
    assert bars[("publish", "proposal")].x == pytest.approx(bars[("draft", "ack")].x + 60 * per_ms + BREAK_PX)
    # The wait itself is drawn across the break, not squeezing the rest.
    approval = bars[("approval", "approval")]
    assert approval.width == pytest.approx(BREAK_PX)
    assert approval.title == "approval 10 min 0 s"


def test_rows_keep_their_first_appearance_order_and_bars_fit() -> None:
    drawn = layout(_work(), width=800)
    assert [label for label, _ in drawn.rows] == ["research", "draft", "approval", "publish"]
    for bar in drawn.bars:
        assert drawn.plot_left <= bar.x and bar.x + bar.width <= drawn.width + 0.01
    assert drawn.ticks[0].label == "+0.0 ms" and drawn.ticks[-1].label == "+10 min 0 s"


def test_short_gaps_are_not_cut() -> None:
    steady = [Interval("a", "send", 0, 100), Interval("b", "send", 150, 300)]
    assert cut_gaps(steady) == []
    assert layout(steady).breaks == ()


def test_a_wait_still_running_is_cut_after_the_last_work() -> None:
    waiting = [Interval("draft", "ack", 0, 50), Interval("approval", "approval", 50, 90_000, elastic=True)]
    assert cut_gaps(waiting) == [(50, 90_000)]


def test_no_intervals_is_an_empty_layout_and_durations_read_well() -> None:
    assert layout([]).bars == ()
    assert [human(v) for v in (0.42, 120, 2400, 192_000, 7_500_000)] == [
        "0.4 ms",
        "120 ms",
        "2.4 s",
        "3 min 12 s",
        "2 h 5 min",
    ]

"""The phase times `pressroom history` prints (`render.phase_text`, `render.duration`): pure."""

from __future__ import annotations

from orchestrator.entrypoints.render import duration, phase_text


def test_durations_read_at_every_scale() -> None:
    assert duration(0.0003) == "+0.3ms"
    assert duration(0.2036) == "+203.6ms"
    assert duration(2.414) == "+2.41s"
    assert duration(185) == "+3m05s"
    assert duration(7620) == "+2h07m"
    assert duration(-0.004) == "-4.0ms"  # another process's clock ran behind


def test_each_phase_after_the_one_before_and_missing_ones_left_out() -> None:
    event = {
        "proposed_at": "2026-12-03T13:42:18.548000Z",
        "authorized_at": "2026-12-03T13:42:18.548300Z",
        "sent_at": "2026-12-03T13:42:18.590000Z",
        "acked_at": "2026-12-03T13:42:20.000000Z",
    }
    assert phase_text(event) == "proposed 13:42:18.548, authorized +0.3ms, sent +41.7ms, acked +1.41s"
    refused = {**event, "sent_at": None, "acked_at": None}
    assert phase_text(refused) == "proposed 13:42:18.548, authorized +0.3ms"
    assert phase_text({"proposed_at": None}) == ""

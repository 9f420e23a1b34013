"""Figures per fault kind from a run's fault windows and sagas: pure, no services."""

from __future__ import annotations

from chaos.figures import (
    NO_FAULT,
    FaultWindow,
    SagaRun,
    as_dicts,
    figures,
    markdown,
    percentile,
    saga_runs,
    windows,
)


def test_nearest_rank_percentiles() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    values = [float(x) for x in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0
    assert percentile([5.0, 1.0, 9.0, 2.0], 50) == 2.0


def test_skipped_and_failed_faults_have_no_window() -> None:
    log = [
        {"kind": "kill-worker", "started": 10.0, "ended": 12.0},
        {"kind": "kill-redis", "started": 20.0, "ended": 22.0, "skipped": "redis already down"},
        {"kind": "restart-postgres", "started": 30.0, "ended": 31.0, "error": "OSError: boom"},
    ]
    assert windows(log) == [FaultWindow("kill-worker", 10.0, 12.0)]


def _run(sid: str | None, submitted: float, settled: float, **kw: object) -> SagaRun:
    return SagaRun(f"r-{sid}", sid, submitted, settled, **kw)  # type: ignore[arg-type]


def test_a_saga_counts_under_each_kind_whose_window_plus_margin_it_overlaps() -> None:
    faults = [
        FaultWindow("kill-worker", 100.0, 102.0),
        FaultWindow("kill-worker", 200.0, 201.0),
        FaultWindow("webhook-5xx", 150.0, 180.0),
    ]
    runs = [
        _run("before", 10.0, 99.0),  # settled before any fault began
        _run("during", 90.0, 101.0),  # in flight when the worker died
        _run("margin", 110.0, 120.0),  # submitted within 10 s of the end: still under it
        _run("after", 113.0, 140.0),  # submitted 11 s after the end
        _run("both", 175.0, 205.0, effect_unknown=True, settlements=("confirmed", "absent")),
        _run(None, 101.0, 101.5),  # lost while the worker was down
    ]
    rows = {r.kind: r for r in figures(faults, runs, margin=10.0)}
    assert list(rows) == ["kill-worker", "webhook-5xx", NO_FAULT]
    kw = rows["kill-worker"]
    assert (kw.faults, kw.sagas, kw.lost) == (2, 3, 1)  # during, margin, both; the lost one
    assert (kw.effect_unknown, kw.confirmed, kw.absent, kw.undo_retried) == (1, 1, 1, 0)
    assert (kw.p50, kw.p99) == (11.0, 30.0)  # latencies 11, 10, 30
    assert rows["webhook-5xx"].sagas == 1 and rows["webhook-5xx"].faults == 1
    calm = rows[NO_FAULT]
    assert (calm.faults, calm.sagas, calm.lost, calm.p50, calm.p99) == (0, 2, 0, 27.0, 89.0)


def test_findings_count_in_the_rows_of_the_sagas_they_belong_to() -> None:
    runs = saga_runs(
        submitted={"r-1": ("s1", 100.0), "r-2": ("s2", 300.0), "r-3": (None, 101.0)},
        transitions={
            "s1": [
                {"to": "ready-for-review", "at": 105.0},
                {"to": "effect-unknown", "at": 120.0},
                {"to": "succeeded", "at": 400.0},
            ],
            "s2": [{"to": "failed", "at": 330.0}, {"to": "succeeded", "at": 500.0}],
        },
        settled_states=frozenset({"succeeded", "failed", "cancelled", "effect-unknown"}),
        end=900.0,
        duplicated={"s2"},
        unauthorized={"s1"},
        settlements={"s1": ["undo-retried"]},
    )
    assert [(r.saga_id, r.submitted, r.settled, r.effect_unknown) for r in runs] == [
        ("s1", 100.0, 120.0, True),  # settled when it first reached effect-unknown
        ("s2", 300.0, 330.0, False),  # first settled: failed, before the operator's retry
        (None, 101.0, 900.0, False),
    ]
    rows = {r.kind: r for r in figures([FaultWindow("delete-5xx", 110.0, 115.0)], runs, margin=0.0)}
    d = rows["delete-5xx"]
    assert (d.sagas, d.lost, d.unauthorized, d.duplicated, d.undo_retried) == (1, 1, 1, 0, 1)
    assert (rows[NO_FAULT].sagas, rows[NO_FAULT].duplicated) == (1, 1)


def test_the_table_has_a_row_per_kind_and_states_the_margin() -> None:
    rows = figures([FaultWindow("kill-relay", 0.0, 1.0)], [_run("a", 0.5, 3.0)], margin=10.0)

    lines = markdown(as_dicts(rows), 10.0)
    assert "plus 10 s" in lines[0]
    assert lines[4].startswith("| kill-relay | 1 | 1 | 0 |") and lines[5].startswith("| no fault | 0 | 0 |")
    assert lines[5].endswith("| – | – |")


def test_the_link_and_clock_kinds_get_rows_of_their_own() -> None:
    """As a run's nemesis logs them: a clock skew's end is when its worker ran on the true
    clock again (added to its entry later), a link fault's is its start plus its hold."""
    log = [
        {"kind": "partition-redis", "started": 100.0, "ended": 110.0, "link": "redis"},
        {"kind": "half-open-redis", "started": 120.0, "ended": 151.0, "forgotten": 9},
        {"kind": "link-cut", "started": 300.0, "ended": 305.0, "armed": 0, "cut": 0},
        {
            "kind": "clock-skew",
            "started": 200.0,
            "ended": 262.0,
            "faketime": "+6m",
            "skew_seen_s": 359.8,
            "unskewed_seen_s": -0.1,
        },
    ]
    runs = [_run("a", 95.0, 105.0), _run("b", 250.0, 270.0), _run("c", 400.0, 420.0)]
    rows = {r.kind: r for r in figures(windows(log), runs, margin=10.0)}
    assert list(rows) == ["clock-skew", "half-open-redis", "link-cut", "partition-redis", NO_FAULT]
    assert (rows["partition-redis"].faults, rows["partition-redis"].sagas) == (1, 1)
    assert rows["clock-skew"].sagas == 1, "b ran while the worker was still skewed"
    assert rows["link-cut"].sagas == 0 and rows[NO_FAULT].sagas == 1

"""The rolling upgrade's pure parts: phases and their figures, the code line each process
prints and its check, error lines, the report; and that PYTHONPATH, not the editable
install, decides which tree a launched process runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.__main__ import main
from chaos.cluster import topology
from chaos.releases import LAUNCH, NEW_ROOT
from chaos.upgrade import finished_at
from chaos.upgrade_report import (
    PHASES,
    Marks,
    SagaTimes,
    code_root,
    error_lines,
    last_start,
    markdown,
    phase_at,
    phase_figures,
    wrong_code,
)

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
MARKS = Marks(began=100.0, ended=200.0)


def test_a_time_falls_in_one_phase() -> None:
    assert [phase_at(t, MARKS) for t in (0, 99.9, 100, 199.9, 200, 1e9)] == [
        "before",
        "before",
        "during",
        "during",
        "after",
        "after",
    ]


def test_phase_figures_count_by_submit_phase_and_by_finish_phase() -> None:
    sagas = [
        SagaTimes(10, "a", "succeeded", 20),  # before, done before
        SagaTimes(90, "b", "succeeded", 150),  # before, finished during: crossed
        SagaTimes(120, "c", "succeeded", 130),
        SagaTimes(190, "d", "failed", 260),  # during, finished after: crossed
        SagaTimes(195, "e", "preparing", None),  # never finished: crossed
        SagaTimes(210, None),  # lost
        SagaTimes(220, "g", "succeeded", 222),
    ]
    f = phase_figures(sagas, MARKS, TERMINAL)
    assert list(f) == list(PHASES)
    assert f["before"] == {
        "submitted": 2,
        "states": {"succeeded": 2},
        "crossed": 1,
        "finished_here": 1,
        "seconds_median": 35.0,
        "seconds_max": 60.0,
    }
    assert f["during"]["states"] == {"failed": 1, "preparing": 1, "succeeded": 1}
    assert (f["during"]["crossed"], f["during"]["finished_here"]) == (2, 2)
    assert (f["during"]["seconds_median"], f["during"]["seconds_max"]) == (40.0, 70.0)
    assert f["after"]["states"] == {"missing": 1, "succeeded": 1}
    assert (f["after"]["crossed"], f["after"]["finished_here"]) == (1, 2)


LOG = """
=== start 1 at 10:00:00 ===
pressroom code: /tmp/old-tree
relay running on redis; Ctrl-C stops it

=== start 2 at 10:01:00 ===
pressroom code: /work/new
relay running on redis; Ctrl-C stops it
"""


def test_the_latest_start_says_which_code_it_runs() -> None:
    assert code_root(last_start(LOG)) == "/work/new"
    assert code_root(LOG.split("=== start 2")[0]) == "/tmp/old-tree"
    assert code_root("relay running\n") is None
    proofs = {"relay": "/work/new", "serve": "/tmp/old-tree", "worker-writer": None}
    assert wrong_code(proofs, "/work/new") == {"serve": "/tmp/old-tree", "worker-writer": None}


def test_error_lines_fold_ids_and_count_kinds() -> None:
    logs = {
        "worker-writer": (
            "[2026-12-04 04:38:14,843: ERROR/MainProcess] saga=10d8195382914389 malformed message\n"
            "[2026-12-04 04:38:15,493: ERROR/MainProcess] saga=1793597ce05e407c malformed message\n"
            "[2026-12-04 04:38:15,500: INFO/MainProcess] fine\n"
        ),
        "relay": "alembic.util.exc.CommandError: Can't locate revision identified by '0012'\n",
    }
    found = error_lines(logs)
    assert found[0] == ("worker-writer", "[#-#-# #:#:#,#: ERROR/MainProcess] saga=# malformed message", 2)
    assert found[1][0] == "relay" and found[1][2] == 1


def test_the_report_names_each_step_and_phase() -> None:
    phases = phase_figures([SagaTimes(10, "a", "succeeded", 20)], MARKS, TERMINAL)
    checker = {
        "submitted": 1,
        "sagas": 1,
        "lost": [],
        "stuck": [],
        "duplicates": [],
        "unauthorized": [],
        "orphans": [],
        "missing": [],
        "effect_unknown": 0,
        "reconciled": {},
    }
    data = {
        "command": "python -m chaos upgrade --from v1",
        "finished_at": "2026-12-04T05:00:00Z",
        "from": {"ref": "v1", "commit": "c1619d7" + "0" * 33, "head": "0012"},
        "to": {"root": "/work/new", "head": "0013"},
        "ok": True,
        "db_upgrade_old": 'exit 0: {"to": "0012"}',
        "db_upgrade_new": 'exit 0: {"from": "0012", "to": "0013"}',
        "old_start_after_upgrade": "exit 0: {}",
        "restarts": [{"process": "relay", "exit": 0, "stop_seconds": 0.5, "ready_seconds": 1.5}],
        "phases": phases,
        "wrong_code": {},
        "not_terminal": 0,
        "dead_letters": 0,
        "audited": 1,
        "audit_failures": {},
        "unexpected_exits": [],
        "error_lines": [],
        "checker": checker,
    }
    text = markdown(data)
    assert "**Result: OK.**" in text and "schema 0012) to the tree at /work/new (schema 0013)" in text
    assert "| restart relay | exit 0 after SIGTERM in 0.5 s, running the new code 1.5 s later |" in text
    assert "| before | 1 | succeeded 1 | 0 | 1 | 10.0 / 10.0 |" in text
    assert "| during | 0 | none | 0 | 0 | – / – |" in text
    assert "before the upgrade ended: checked, failing | 1, 0 |" in text


def test_processes_restart_relay_first_then_each_worker_then_serve() -> None:
    names = [name for name, _ in topology(8080)]
    assert names[0] == "relay" and names[-1] == "serve"
    assert names[1:-1] == ["worker-researcher", "worker-writer", "worker-reviewer", "worker-publisher"]


def test_pythonpath_decides_the_code_a_launched_process_runs(tmp_path: Path) -> None:
    # A tree whose CLI says where it is: launched with PYTHONPATH on it, its code runs, not
    # the editable install's; with PYTHONPATH on this tree, this tree's.
    cli = tmp_path / "orchestrator" / "entrypoints"
    cli.mkdir(parents=True)
    (tmp_path / "orchestrator" / "__init__.py").write_text("")
    (cli / "__init__.py").write_text("")
    (cli / "cli.py").write_text("import sys\ndef run():\n    print('the other tree', sys.argv[1:])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    other = subprocess.run(
        [sys.executable, "-c", LAUNCH, "relay"],
        env={**env, "PYTHONPATH": str(tmp_path)},
        cwd=tmp_path.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.stderr.splitlines()[0] == f"pressroom code: {tmp_path}"
    assert other.stdout.strip() == "the other tree ['relay']"
    here = subprocess.run(
        [sys.executable, "-c", LAUNCH, "--help"],
        env={**env, "PYTHONPATH": str(NEW_ROOT)},
        cwd=tmp_path.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert here.returncode == 0 and here.stderr.splitlines()[0] == f"pressroom code: {NEW_ROOT}"


def test_finish_time_is_the_last_terminal_transition() -> None:
    path = [
        {"to": "ready-for-review", "at": "2026-12-04T05:00:00+00:00"},
        {"to": "succeeded", "at": "2026-12-04T05:00:10+00:00"},
    ]
    assert finished_at(path) == finished_at([{"to": "failed", "at": "2026-12-04T05:00:10"}])
    assert finished_at(path) == 1796360410.0
    assert finished_at(path[:1]) is None


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade", "--from", "c1619d7", "--sagas", "1"]) == 2
    assert main(["upgrade", "--from", "no-such-ref-anywhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("chaos upgrade: --sagas must be at least 2")
    assert err[1] == f"chaos upgrade: no-such-ref-anywhere is not a commit of {NEW_ROOT}"

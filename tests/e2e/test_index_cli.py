"""`pressroom index CORPUS_DIR [--json]` through the installed console script."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.conftest import SAMPLE_CORPUS, Cli


def test_index_builds_then_reports_what_changed(cli: Cli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)

    first = cli.json("index", str(corpus))
    assert first["corpus"] == str(corpus.resolve())
    assert sorted(first["added"]) == sorted(p.name for p in corpus.iterdir())
    assert (first["changed"], first["removed"], first["unchanged"]) == ([], [], 0)

    again = cli.json("index", str(corpus))
    assert (again["added"], again["changed"], again["removed"], again["unchanged"]) == ([], [], [], 6)
    assert again["files_read"] == 0

    target = corpus / "overview.md"
    target.write_text("The overview was rewritten.\n", encoding="utf-8")
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    (corpus / "bookmobile.txt").unlink()
    (corpus / "new.md").write_text("A new note on the reading room.\n", encoding="utf-8")

    third = cli.json("index", str(corpus))
    assert (third["added"], third["changed"], third["removed"]) == (
        ["new.md"],
        ["overview.md"],
        ["bookmobile.txt"],
    )
    assert third["unchanged"] == 4 and third["files_read"] == 2

    human = cli.run("index", str(corpus))
    assert human.returncode == 0 and "0 added, 0 changed, 0 removed, 6 unchanged" in human.stdout


def test_index_of_a_missing_folder_is_bad_input(cli: Cli, tmp_path: Path) -> None:
    done = cli.run("index", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: corpus folder not found") and len(done.stderr.splitlines()) == 1


def test_index_outside_the_allowed_roots_is_refused_as_bad_input(cli: Cli, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    confined = Cli({**cli.env, "PRESSROOM_ALLOWED_ROOTS": str(allowed)}, tmp_path)
    done = confined.run("index", str(SAMPLE_CORPUS))
    assert done.returncode == 2 and "allowed roots" in done.stderr

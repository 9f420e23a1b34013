"""Sagas sharing one corpus index, on SQLite and PostgreSQL: the second reads no unchanged file.

Reads are counted through the index's `Reader` port (a counting reader that
reads the real file); the database, the files and the pipeline are real.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from roles.artifacts import SourceFile
from roles.index import CorpusIndexes, read_from_disk
from sagas.destinations.memory import reset_memory_stores

BRIEF = "history of the library network"


class CountingReader:
    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, base: Path, path: Path, rel: str) -> SourceFile:
        self.paths.append(rel)
        return read_from_disk(base, path, rel)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(autouse=True)
def _fresh_memory() -> None:
    reset_memory_stores()


def _settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=db_url, broker_url="inline://", secret="s", secret_file=tmp_path / "secret")


def _submit(app: object, corpus: Path, n: int) -> dict[str, object]:
    out = app.submissions.submit(brief=BRIEF, corpus=str(corpus), destinations=[f"memory:m{n}"], actor="dana")  # type: ignore[arg-type]
    assert out["state"] == "ready-for-review", out
    return out


def test_a_second_saga_reads_no_unchanged_file_and_a_changed_one_is_read_once(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    reader = CountingReader()
    app = build_app(
        _settings(db_url, tmp_path),
        indexes=CorpusIndexes(tmp_path / "index", reader=reader),
        memory_destinations=True,
    )

    first = _submit(app, corpus, 1)
    files = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    assert sorted(reader.paths) == files  # built once, by the submit's refresh
    reader.paths.clear()

    second = _submit(app, corpus, 2)
    assert reader.paths == []  # research, the writer's sources and the review: all from the index

    target = corpus / "overview.md"
    target.write_text(target.read_text(encoding="utf-8") + "\nThe network added a tool library in 2024.\n")
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    third = _submit(app, corpus, 3)
    assert reader.paths == ["overview.md"]

    shown = [app.reads.show(str(s["saga_id"])) for s in (first, second, third)]
    assert shown[0]["markdown"] == shown[1]["markdown"]
    assert all(v["review"]["verdict"] == "pass" for v in shown)
    submitted = [e for e in app.reads.history(str(second["saga_id"]))["events"] if e["status"] == "submitted"]
    assert submitted[0]["detail"]["index"] == {
        "added": 0,
        "changed": 0,
        "removed": 0,
        "unchanged": len(files),
    }


def test_two_apps_share_the_index_folder(db_url: str, tmp_path: Path, corpus: Path) -> None:
    settings = _settings(db_url, tmp_path).model_copy(update={"index_dir": tmp_path / "shared-index"})
    build_app(settings, memory_destinations=True).indexes.for_corpus(corpus).refresh()  # type: ignore[union-attr]
    reader = CountingReader()
    worker = build_app(
        settings, indexes=CorpusIndexes(settings.index_folder(), reader=reader), memory_destinations=True
    )

    _submit(worker, corpus, 4)

    assert reader.paths == []


_REFRESHER = """
import sys
from pathlib import Path
from roles.index import CorpusIndexes

corpus, folder, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
index = CorpusIndexes(folder).for_corpus(corpus)
for n in range(6):
    (corpus / f"{name}-{n}.md").write_text(f"The {name}{n} signal box.\\n", encoding="utf-8")
    index.refresh()
    found = [p.source for p in index.evidence(f"{name}{n}").passages]
    assert found == [f"{name}-{n}.md"], found
print("ok")
"""


def test_processes_refreshing_one_index_at_once_each_see_their_changes(tmp_path: Path, corpus: Path) -> None:
    import subprocess
    import sys

    folder = tmp_path / "shared-index"
    CorpusIndexes(folder).for_corpus(corpus).refresh()
    root = Path(__file__).resolve().parents[2]
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _REFRESHER, str(corpus), str(folder), name],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta", "gamma")
    ]
    outcomes = [run.communicate(timeout=120) for run in runs]

    assert [(run.returncode, out.strip()) for run, (out, _) in zip(runs, outcomes, strict=True)] == [
        (0, "ok")
    ] * 3, [err for _, err in outcomes]
    index = CorpusIndexes(folder).for_corpus(corpus)
    fresh = CorpusIndexes(tmp_path / "fresh").for_corpus(corpus)
    fresh.refresh()
    assert index.refresh().files_read == 0
    found = sorted(p.source for p in index.evidence("signal box", limit=50).passages)
    assert found == sorted(p.source for p in fresh.evidence("signal box", limit=50).passages)
    assert len(found) == 18

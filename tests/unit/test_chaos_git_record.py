"""The git destination's history as the chaos checker replays it: written by the real `git:`
destination into a real repository, read back with `git log`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from chaos import git_record
from chaos.checker import Approval, Records, Saga, Step, Submission, check
from sagas.destinations.base import PublishedVersion
from sagas.destinations.git import KEY_TRAILER, GitDestination


def _version(saga: str) -> PublishedVersion:
    return PublishedVersion(
        saga_id=saga,
        version=1,
        version_digest=f"digest-{saga}",
        title=f"Page of {saga}",
        slug=f"page-{saga}",
        markdown=f"# Page of {saga}\n",
        approver="erin",
    )


def test_history_replays_to_publishes_compensations_and_what_is_live(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    uri = f"git:{repo}"
    assert git_record.read(repo) == [], "no repository yet: an empty record"
    dest = GitDestination(repo)
    dest.publish("key-a", _version("a"))
    dest.publish("key-b", _version("b"))
    dest.publish("key-a", _version("a"))  # a replay: found in history, no new commit
    dest.compensate("key-b", {})
    dest.publish("key-b", _version("b"))  # a retry after the undo: a new commit under the same key

    effects, live = git_record.replay(uri, git_record.read(repo))
    assert [(e.kind, e.key) for e in effects] == [
        ("apply", "key-a"),
        ("apply", "key-b"),
        ("undo", "key-b"),
        ("apply", "key-b"),
    ]
    assert {e.saga_id for e in effects if e.kind == "apply"} == {"a", "b"}
    assert live == {"key-a": "digest-a", "key-b": "digest-b"}

    sagas = tuple(Saga(s, "succeeded", None, (Step(uri, "done", f"key-{s}", f"digest-{s}"),)) for s in "ab")
    records = Records(
        submissions=tuple(Submission(f"r-{s}", s) for s in "ab"),
        settled=sagas,
        final=sagas,
        approvals=tuple(Approval(s, f"digest-{s}", (uri,), consumed=True) for s in "ab"),
        ledger={"key-a": "a", "key-b": "b"},
        effects=effects,
        live={(uri, k): d for k, d in live.items()},
    )
    assert check(records).ok

    # A second publish commit of a live key, as a destination that lost its idempotency would make.
    (repo / "again.md").write_text("again\n")
    git = ["git", "-c", "user.name=x", "-c", "user.email=x@x", "-c", "core.hooksPath=/dev/null"]
    subprocess.run([*git, "add", "again.md"], cwd=repo, check=True)
    message = (
        f"Publish again\n\nPressroom-Saga: a\nPressroom-Version-Digest: digest-a\n{KEY_TRAILER}: key-a\n"
    )
    subprocess.run([*git, "commit", "-q", "-m", message], cwd=repo, check=True)
    effects, live = git_record.replay(uri, git_record.read(repo))
    found = check(
        Records(**{**records.__dict__, "effects": effects, "live": {(uri, k): d for k, d in live.items()}})
    )
    assert [(d["uri"], d["key"], d["applies"]) for d in found.duplicates] == [(uri, "key-a", 2)]


def test_a_compensated_key_is_not_live(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    dest = GitDestination(repo)
    dest.publish("key-a", _version("a"))
    dest.compensate("key-a", {})
    effects, live = git_record.replay(f"git:{repo}", git_record.read(repo))
    assert [e.kind for e in effects] == ["apply", "undo"] and live == {}


def test_parse_reads_each_trailer_and_skips_what_is_not_a_record() -> None:
    text = "\n".join(
        [
            "\x1f".join(["aaa", "k1", "", "saga-1", "d-1"]) + "\x1e",
            "\x1f".join(["bbb", "", "k1", "", ""]) + "\x1e",
            "not a record\x1e",
        ]
    )
    commits = git_record.parse(text)
    assert [(c.sha, c.keys, c.compensates, c.saga_id, c.digest) for c in commits] == [
        ("aaa", ("k1",), (), "saga-1", "d-1"),
        ("bbb", (), ("k1",), None, None),
    ]

"""What the chaos operator does with an `effect-unknown` saga, as each destination's own record
says: the records are written by the real `git:` and `site:` destinations into a run folder."""

from __future__ import annotations

from pathlib import Path

from chaos.checker import Saga, Step
from chaos.destinations import Destinations
from chaos.operator import decide
from sagas.destinations.base import PublishedVersion
from sagas.destinations.git import GitDestination
from sagas.destinations.site import SiteDestination


def _version(saga: str) -> PublishedVersion:
    return PublishedVersion(
        saga_id=saga,
        version=1,
        version_digest=f"digest-{saga}",
        title=f"Page of {saga}",
        slug=f"page-{saga}",
        markdown=f"# Page of {saga}\n",
    )


def test_each_unsettled_step_is_settled_as_its_destination_says(tmp_path: Path) -> None:
    dest = Destinations(tmp_path, stall_seconds=1.0)  # nothing started: only the records are read
    GitDestination(dest.repo).publish("git-live", _version("a"))
    GitDestination(dest.repo).publish("git-undone", _version("b"))
    GitDestination(dest.repo).compensate("git-undone", {})
    SiteDestination(dest.site).publish("site-live", _version("c"))
    hook_a, hook_b = list(dest.hook_uris)
    sagas = [
        Saga("a", "effect-unknown", None, (Step(dest.git_uri, "uncertain", "git-live", "digest-a"),)),
        Saga("b", "effect-unknown", None, (Step(dest.git_uri, "compensation-failed", "git-undone", "d"),)),
        Saga("c", "effect-unknown", None, (Step(dest.site_uri, "compensation-failed", "site-live", "d"),)),
        Saga("d", "effect-unknown", None, (Step(hook_a, "uncertain", "never-sent", "d"),)),
        Saga("e", "failed", None, (Step(hook_b, "uncertain", "not-ours-to-settle", "d"),)),
        Saga("f", "effect-unknown", None, (Step(hook_b, "done", "settled-already", "d"),)),
    ]
    jobs, undo_again = decide(sagas, dest.is_live)
    assert jobs == [
        ("a", dest.git_uri, "confirmed"),  # git's history holds the publish
        ("b", dest.git_uri, "absent"),  # the undo took after all: history holds its revert
        ("d", hook_a, "absent"),
    ]
    assert undo_again == ["c"], "an undo that failed while the page is still up runs again"


def test_git_is_asked_before_its_repository_exists(tmp_path: Path) -> None:
    dest = Destinations(tmp_path, stall_seconds=1.0)
    assert not dest.is_live(dest.git_uri, "any-key")

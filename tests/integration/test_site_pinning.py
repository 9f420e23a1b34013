"""The `site:` destination on real files: pages that never collide, links never followed.

Each attack plants a link (or a hard link) where the site's own file or folder
is expected, then publishes or compensates through the adapter, opened by URI
with the allowed roots set as `pressroom` sets them. Every test then compares
the folder outside the roots byte for byte with what it was, and the site
folder with what it was before the refused step.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.errors import MaybeApplied, NotApplied
from sagas.destinations.base import Destination, PublishedVersion
from sagas.destinations.registry import open_destination

SECRET = "s3cret-from-outside"
KEY = "k-attacked"


def version(saga_id: str, body: str = "Revenue grew.", title: str = "Quarterly Report") -> PublishedVersion:
    markdown = f"# {title}\n\n{body}\n"
    return PublishedVersion(
        saga_id=saga_id,
        version=1,
        version_digest=hashlib.sha256(markdown.encode()).hexdigest(),
        title=title,
        slug="",
        markdown=markdown,
    )


def tree(folder: Path) -> dict[str, Any]:
    """Every entry under `folder`: a link's target, a file's bytes, or "folder"."""
    found: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_dir():
            found[name] = "folder"
        else:
            found[name] = path.read_bytes()
    return found


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(allowed root, site folder in it, outside folder holding a secret)."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    secret = {"key": KEY, "sha256": "0" * 64, "path": str(outside / "x"), "slug": SECRET, "page": "x"}
    (outside / "secret.json").write_text(json.dumps({"a-page": {"title": SECRET, **secret}}))
    (outside / "receipt.json").write_text(json.dumps(secret))
    (outside / "state.json").write_text(json.dumps({"name": "../outside/x", "sha256": "0" * 64}))
    (outside / "victim.txt").write_text("keep me")
    (outside / "folder").mkdir()
    return allowed, allowed / "site", outside


def site(folder: Path, roots: list[Path]) -> Destination:
    return open_destination(f"site:{folder}", timeout=10, roots=roots)


def assert_untouched(outside: Path, before: dict[str, Any], site_folder: Path) -> None:
    assert tree(outside) == before, "nothing outside the roots was written"
    for path in site_folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_nlink == 1:  # not the plant itself
            assert SECRET.encode() not in path.read_bytes(), f"{path} holds bytes read from outside"


# -- 1. pages that never collide ------------------------------------------------------


def test_twenty_sagas_with_one_title_keep_twenty_pages_and_an_undo_removes_only_its_own(
    places: tuple[Path, Path, Path],
) -> None:
    allowed, folder, _ = places
    dest = site(folder, [allowed])
    sagas = [uuid.uuid4().hex for _ in range(20)]
    receipts = {saga: dest.publish(f"k-{saga}", version(saga, f"Saga {saga}.")) for saga in sagas}
    assert len(list(folder.glob("*.md"))) == 20 and len(list(folder.glob("*.html"))) == 21
    assert len({r["path"] for r in receipts.values()}) == 20
    undone = sagas[7]
    dest.compensate(f"k-{undone}", receipts[undone])
    assert not Path(receipts[undone]["path"]).exists()
    index = (folder / "index.html").read_text("utf-8")
    for saga in sagas:
        if saga == undone:
            assert Path(receipts[saga]["html"]).name not in index
            continue
        page = Path(receipts[saga]["path"])
        assert page.read_text("utf-8") == version(saga, f"Saga {saga}.").markdown
        assert f'href="{Path(receipts[saga]["html"]).name}"' in index


def test_a_second_version_replaces_its_own_page_only(places: tuple[Path, Path, Path]) -> None:
    allowed, folder, _ = places
    dest = site(folder, [allowed])
    mine, theirs = uuid.uuid4().hex, uuid.uuid4().hex
    first = dest.publish("k-mine-1", version(mine, "first"))
    other = dest.publish("k-theirs", version(theirs, "theirs"))
    second = dest.publish("k-mine-2", version(mine, "second", title="A New Title"))
    assert second["path"] == first["path"] != other["path"]
    assert "second" in Path(second["path"]).read_text("utf-8")
    index = (folder / "index.html").read_text("utf-8")
    assert "A New Title" in index and "Quarterly Report" in index  # theirs keeps its line
    dest.compensate("k-mine-2", second)
    assert "first" in Path(first["path"]).read_text("utf-8")
    assert "theirs" in Path(other["path"]).read_text("utf-8")


def test_a_file_already_using_a_name_is_passed_over_not_overwritten(places: tuple[Path, Path, Path]) -> None:
    allowed, folder, outside = places
    saga = uuid.uuid4().hex
    folder.mkdir()
    (folder / f"quarterly-report-{saga[:8]}.md").write_text("the site's own page")
    (folder / f"quarterly-report-{saga[:12]}.html").mkdir()
    receipt = site(folder, [allowed]).publish("k1", version(saga))
    assert Path(receipt["path"]).name == f"quarterly-report-{saga[:16]}.md"
    assert (folder / f"quarterly-report-{saga[:8]}.md").read_text() == "the site's own page"


@pytest.mark.parametrize("part", [".md", ".html"])
def test_a_link_planted_at_the_name_a_new_page_would_take_is_refused(
    places: tuple[Path, Path, Path], part: str
) -> None:
    allowed, folder, outside = places
    saga = uuid.uuid4().hex
    folder.mkdir()
    (folder / f"quarterly-report-{saga[:8]}{part}").symlink_to(outside / "victim.txt")
    before_outside, before_site = tree(outside), tree(folder)
    with pytest.raises(NotApplied, match="not a plain file"):
        site(folder, [allowed]).publish(KEY, version(saga))
    assert_untouched(outside, before_outside, folder)
    assert {k: v for k, v in tree(folder).items() if not k.startswith(".pressroom")} == before_site
    assert not (folder / "index.html").exists()
    assert [p for p in folder.glob("*.md") if not p.is_symlink()] == []


# -- 2. links where the site's own files are expected -------------------------------


def plant_dir_link(path: Path, target: Path) -> None:
    if path.is_dir():
        os.rename(path, path.with_name(path.name + ".moved"))
    path.symlink_to(target, target_is_directory=True)


def plant_file_link(path: Path, target: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to(target)


PUBLISH_PLANTS = {
    ".pressroom": lambda f, o: plant_dir_link(f / ".pressroom", o / "folder"),
    "receipts": lambda f, o: plant_dir_link(f / ".pressroom" / "receipts", o / "folder"),
    "previous": lambda f, o: plant_dir_link(f / ".pressroom" / "previous", o / "folder"),
    "lock": lambda f, o: plant_file_link(f / ".pressroom" / "lock", o / "victim.txt"),
    "dangling lock": lambda f, o: plant_file_link(f / ".pressroom" / "lock", o / "made-by-pressroom"),
    "pages.json": lambda f, o: plant_file_link(f / ".pressroom" / "pages.json", o / "secret.json"),
    "hard-linked pages.json": lambda f, o: (
        (f / ".pressroom" / "pages.json").unlink(),
        os.link(o / "secret.json", f / ".pressroom" / "pages.json"),
    ),
    "receipt": lambda f, o: plant_file_link(
        f / ".pressroom" / "receipts" / f"{KEY}.json", o / "receipt.json"
    ),
    "saved previous page": lambda f, o: plant_dir_link(f / ".pressroom" / "previous" / KEY, o / "folder"),
    "index.html": lambda f, o: plant_file_link(f / "index.html", o / "victim.txt"),
}


@pytest.mark.parametrize("planted", sorted(PUBLISH_PLANTS))
def test_a_link_planted_in_the_bookkeeping_is_refused_and_nothing_goes_live(
    places: tuple[Path, Path, Path], planted: str
) -> None:
    allowed, folder, outside = places
    dest = site(folder, [allowed])
    dest.publish("k-earlier", version(uuid.uuid4().hex, "an earlier page"))
    PUBLISH_PLANTS[planted](folder, outside)
    before_outside, before_site = tree(outside), tree(folder)
    with pytest.raises(NotApplied) as refused:
        dest.publish(KEY, version(uuid.uuid4().hex, "the attacked publish"))
    assert "\n" not in str(refused.value)
    assert_untouched(outside, before_outside, folder)
    assert tree(folder) == before_site, "the refused step left nothing live, not even a temp file"
    assert dest.status(KEY).kind != "applied"


@pytest.mark.parametrize("part", [".md", ".html"])
def test_a_link_planted_as_the_sagas_own_page_is_refused(places: tuple[Path, Path, Path], part: str) -> None:
    allowed, folder, outside = places
    dest = site(folder, [allowed])
    saga = uuid.uuid4().hex
    first = dest.publish("k-v1", version(saga, "version one"))
    plant_file_link(Path(first["path"]).with_suffix(part), outside / "victim.txt")
    before_outside, before_site = tree(outside), tree(folder)
    with pytest.raises(NotApplied, match="not a plain file"):
        dest.publish(KEY, version(saga, "version two"))
    assert_untouched(outside, before_outside, folder)
    assert tree(folder) == before_site
    if part == ".md":
        with pytest.raises(NotApplied, match="symbolic link"):
            dest.compensate("k-v1", first)  # the undo reads the page's .md: never through a link
        assert tree(folder) == before_site
    else:
        dest.compensate("k-v1", first)  # the undo only removes the .html: the link goes, not its target
        assert not os.path.lexists(Path(first["html"]))
    assert_untouched(outside, before_outside, folder)


def test_a_link_planted_as_the_saved_state_is_not_read_by_the_undo(places: tuple[Path, Path, Path]) -> None:
    allowed, folder, outside = places
    dest = site(folder, [allowed])
    receipt = dest.publish(KEY, version(uuid.uuid4().hex))
    plant_file_link(folder / ".pressroom" / "previous" / KEY / "state.json", outside / "state.json")
    before_outside, before_site = tree(outside), tree(folder)
    with pytest.raises(NotApplied, match="symbolic link"):
        dest.compensate(KEY, receipt)
    assert_untouched(outside, before_outside, folder)
    assert tree(folder) == before_site
    assert dest.status(KEY).kind == "applied"


def test_status_does_not_read_a_receipt_through_a_link(places: tuple[Path, Path, Path]) -> None:
    allowed, folder, outside = places
    dest = site(folder, [allowed])
    dest.publish("k-earlier", version(uuid.uuid4().hex))
    plant_file_link(folder / ".pressroom" / "receipts" / f"{KEY}.json", outside / "receipt.json")
    answer = dest.status(KEY)
    assert answer.kind == "unknown" and answer.receipt is None and "symbolic link" in answer.detail


@pytest.mark.parametrize("dangling", [True, False])
def test_a_style_css_link_is_the_sites_own_and_never_opened(
    places: tuple[Path, Path, Path], dangling: bool
) -> None:
    allowed, folder, outside = places
    folder.mkdir()
    target = outside / ("nothing-here.css" if dangling else "victim.txt")
    (folder / "style.css").symlink_to(target)
    before = tree(outside)
    receipt = site(folder, [allowed]).publish(KEY, version(uuid.uuid4().hex))
    assert Path(receipt["path"]).exists() and (folder / "index.html").is_file()
    assert os.readlink(folder / "style.css") == str(target)
    assert_untouched(outside, before, folder)


# -- 3. the folder itself, pinned and checked against the roots ----------------------


def test_a_site_folder_that_is_a_link_out_of_the_roots_is_refused(places: tuple[Path, Path, Path]) -> None:
    allowed, folder, outside = places
    folder.symlink_to(outside / "folder", target_is_directory=True)
    before = tree(outside)
    with pytest.raises(NotApplied, match="outside the allowed roots"):
        site(folder, [allowed]).publish(KEY, version(uuid.uuid4().hex))
    with pytest.raises(NotApplied, match="outside the allowed roots"):
        site(folder, [allowed]).compensate(KEY, {})
    assert site(folder, [allowed]).status(KEY).kind == "unknown"
    assert tree(outside) == before


def test_a_missing_site_folder_is_not_made_outside_the_roots(places: tuple[Path, Path, Path]) -> None:
    allowed, _, outside = places
    (allowed / "door").symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    with pytest.raises(NotApplied, match="outside the allowed roots"):
        site(allowed / "door" / "new-site" / "deeper", [allowed]).publish(KEY, version(uuid.uuid4().hex))
    assert tree(outside) == before, "no folder was made outside"


def test_a_link_inside_the_roots_to_a_folder_inside_them_is_fine(places: tuple[Path, Path, Path]) -> None:
    allowed, folder, _ = places
    (allowed / "real").mkdir()
    folder.symlink_to(allowed / "real", target_is_directory=True)
    receipt = site(folder, [allowed]).publish(KEY, version(uuid.uuid4().hex))
    assert Path(receipt["path"]).parent == (allowed / "real").resolve()


def test_without_roots_the_folder_is_still_pinned(places: tuple[Path, Path, Path]) -> None:
    _, folder, outside = places
    dest = site(folder, [])
    dest.publish("k-earlier", version(uuid.uuid4().hex))
    PUBLISH_PLANTS["pages.json"](folder, outside)
    before = tree(outside)
    with pytest.raises(NotApplied, match="symbolic link"):
        dest.publish(KEY, version(uuid.uuid4().hex))
    assert_untouched(outside, before, folder)


def test_a_refused_step_is_never_reported_maybe_applied(places: tuple[Path, Path, Path]) -> None:
    """A planted link is found before anything goes live: definite, so the saga can fail cleanly."""
    allowed, folder, outside = places
    dest = site(folder, [allowed])
    dest.publish("k-earlier", version(uuid.uuid4().hex))
    PUBLISH_PLANTS["index.html"](folder, outside)
    try:
        dest.publish(KEY, version(uuid.uuid4().hex))
    except MaybeApplied:  # pragma: no cover - the failure this test exists to catch
        pytest.fail("a refused step was reported as maybe applied")
    except NotApplied:
        pass
    else:
        pytest.fail("a link planted as index.html was written through")


def test_a_folder_moved_out_of_the_roots_mid_step_gets_nothing_renamed_in(
    places: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The descriptor is checked against the roots again just before the first rename."""
    from sagas.destinations import site as site_module

    allowed, folder, outside = places
    dest = site(folder, [allowed])
    dest.publish("k-earlier", version(uuid.uuid4().hex))
    moved = outside / "moved-site"
    real_render = site_module.render_page

    def render_while_moving(*args: Any) -> str:
        os.rename(folder, moved)  # the folder leaves the roots after it was pinned and checked
        return real_render(*args)

    monkeypatch.setattr(site_module, "render_page", render_while_moving)
    before = tree(moved.parent / "folder")
    with pytest.raises(NotApplied, match="moved outside the allowed roots"):
        dest.publish(KEY, version(uuid.uuid4().hex))
    assert len(list(moved.glob("*.md"))) == 1, "only the earlier page: nothing of this step went live"
    assert not list(moved.rglob("*.tmp")) and not (moved / ".pressroom" / "previous" / KEY).exists()
    assert tree(moved.parent / "folder") == before

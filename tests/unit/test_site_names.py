"""Page names in a `site:` folder: one per saga, stable across its versions, never another's."""

from __future__ import annotations

import hashlib

import pytest

from sagas.destinations.site_names import (
    Entry,
    NoFreeName,
    dump_pages,
    is_page_name,
    page_name,
    parse_pages,
    saga_tag,
    titles,
)

pytestmark = pytest.mark.unit

A = "3f2a91c0" + "a" * 24
B = "3f2a91c0" + "b" * 24  # shares A's first 8 hex digits


def nothing_in_use(name: str) -> bool:
    return False


def test_the_tag_is_the_saga_id_prefix_people_already_type() -> None:
    assert saga_tag(A, 8) == "3f2a91c0"
    assert page_name("quarterly-report", A, {}, nothing_in_use) == "quarterly-report-3f2a91c0"


def test_an_id_that_is_not_hex_is_tagged_by_its_hash() -> None:
    assert saga_tag("saga-1", 8) == hashlib.sha256(b"saga-1").hexdigest()[:8]
    assert is_page_name(page_name("report", "Saga/../1", {}, nothing_in_use))


def test_twenty_sagas_with_one_title_get_twenty_names() -> None:
    pages: dict[str, Entry] = {}
    for n in range(20):
        saga = f"{n:08x}" + "0" * 24
        pages[page_name("weekly-notes", saga, pages, nothing_in_use)] = Entry("Weekly notes", saga)
    assert len(pages) == 20


def test_a_saga_keeps_its_name_when_its_title_changes() -> None:
    pages = {"old-title-3f2a91c0": Entry("Old title", A)}
    assert page_name("new-title", A, pages, nothing_in_use) == "old-title-3f2a91c0"


def test_a_taken_name_is_passed_over_for_a_longer_tag() -> None:
    pages = {"report-3f2a91c0": Entry("Report", A)}
    assert page_name("report", B, pages, nothing_in_use) == "report-3f2a91c0bbbb"
    in_use = {"report-3f2a91c0bbbb"}  # say, the site's own file, or a planted link
    assert page_name("report", B, pages, in_use.__contains__) == "report-3f2a91c0bbbbbbbb"


def test_when_every_name_is_in_use_there_is_no_name() -> None:
    with pytest.raises(NoFreeName):
        page_name("report", A, {}, lambda name: True)


def test_the_listing_of_an_earlier_release_still_reads() -> None:
    pages = parse_pages({"report": "Report", "notes-3f2a91c0": {"title": "Notes", "saga_id": A}})
    assert pages == {"report": Entry("Report"), "notes-3f2a91c0": Entry("Notes", A)}
    assert parse_pages(dump_pages(pages)) == pages
    assert titles(pages) == {"report": "Report", "notes-3f2a91c0": "Notes"}


@pytest.mark.parametrize("name", ["../etc", "a/b", ".pressroom", "", "Index", "x" * 161, "a--b", "-a"])
def test_names_that_are_no_page_are_dropped_from_the_listing(name: str) -> None:
    assert not is_page_name(name)
    assert parse_pages({name: "Title", "ok": "Fine"}) == {"ok": Entry("Fine")}

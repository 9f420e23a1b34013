"""`version_digest`: the digest of what a version publishes covers its title."""

from __future__ import annotations

from orchestrator.harness.digests import (
    canonical_json,
    markdown_title,
    sha256_hex,
    text_digest,
    version_digest,
)


def test_a_title_that_is_the_markdowns_heading_keeps_the_markdown_digest() -> None:
    md = "intro\n# Reading rooms\n\nText.\n"
    assert markdown_title(md) == "Reading rooms"
    assert version_digest("Reading rooms", md) == text_digest(md)


def test_any_other_title_changes_the_digest() -> None:
    md = "# Reading rooms\n\nText.\n"
    approved = version_digest("Reading rooms", md)
    for forged in ("Recalled", "Reading rooms ", "reading rooms", ""):
        assert version_digest(forged, md) != approved, forged
    plain = "No heading here.\n"
    assert markdown_title(plain) is None and markdown_title("#  \n") is None
    assert version_digest("A", plain) == sha256_hex(canonical_json(["A", plain]))
    assert version_digest("A", plain) != version_digest("B", plain) != text_digest(plain)


def test_the_two_forms_cannot_meet() -> None:
    # The markdown that is the other form's canonical JSON has no heading: it is hashed as a pair.
    md = "# T\n\nbody\n"
    as_text = canonical_json(["X", md]).decode()
    assert markdown_title(as_text) is None
    assert version_digest("X", md) != version_digest("X", as_text)


def test_a_version_hashed_before_the_title_joined_is_refused_when_its_title_is_not_its_heading() -> None:
    import pytest

    from orchestrator.core.errors import Refused
    from sagas.effect_checks import check_bytes

    plain = "Text without a heading.\n"
    with pytest.raises(Refused, match="integrity: the title of version 3"):
        check_bytes(plain, text_digest(plain), version=3, title="Old title")
    headed = "# Old title\n\nText.\n"
    check_bytes(headed, text_digest(headed), version=3, title="Old title")  # drafted versions are unchanged

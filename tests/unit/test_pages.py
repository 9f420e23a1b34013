"""The page templates alone (no services): the header per visitor, and which forms each role sees."""

from __future__ import annotations

from typing import Any

from orchestrator.entrypoints.web.pages import OPEN_VIEWER, Viewer, error_page, saga_list, saga_page
from tests.support.web import field_names, tags

STATUS: dict[str, Any] = {
    "saga_id": "s1",
    "state": "ready-for-review",
    "version": 1,
    "title": "T",
    "destinations": [{"uri": "site:/tmp/x", "state": "pending"}],
}
VERSION: dict[str, Any] = {"version": 1, "version_digest": "d" * 64, "is_head": True, "markdown": "# T\n"}


def _actions(page: str) -> set[str]:
    return {attrs.get("action", "") for tag, attrs in tags(page) if tag == "form"}


def _page(viewer: Viewer | None) -> str:
    return saga_page(STATUS, VERSION, {"events": []}, token="tok", viewer=viewer)


def test_the_header_says_open_mode_in_one_line() -> None:
    page = saga_list({"sagas": []}, viewer=OPEN_VIEWER)
    [line] = [ln for ln in page.splitlines() if "open mode" in ln]
    assert line.startswith("<header>") and line.endswith("</span>")


def test_the_header_names_the_signed_in_user_or_offers_sign_in() -> None:
    signed = saga_list(
        {"sagas": []}, viewer=Viewer(mode="closed", name="Rita <b>", roles=("reviewer",), csrf="c")
    )
    assert "signed in as <strong>Rita &lt;b&gt;</strong> (reviewer)" in signed
    assert "/sign-out" in _actions(signed)
    proxied = saga_list({"sagas": []}, viewer=Viewer(mode="closed", name="rita", proxied=True))
    assert "/sign-out" not in _actions(proxied)
    anonymous = saga_list({"sagas": []}, viewer=Viewer(mode="closed"))
    assert 'href="/sign-in"' in anonymous and "signed in as" not in anonymous
    assert "open mode" not in error_page(404, "gone") and "signed in" not in error_page(404, "gone")


def test_open_mode_shows_every_form_with_a_name_field() -> None:
    page = _page(OPEN_VIEWER)
    assert {"/sagas/s1/approve", "/sagas/s1/reject", "/sagas/s1/edit", "/sagas/s1/cancel"} <= _actions(page)
    assert "name" in field_names(page)


def test_closed_mode_shows_the_forms_of_the_users_roles_without_a_name_field() -> None:
    reviewer = _page(Viewer(mode="closed", name="rita", roles=("reviewer",), csrf="c"))
    assert _actions(reviewer) == {"/sagas/s1/approve", "/sagas/s1/reject", "/sign-out"}
    assert "name" not in field_names(reviewer)
    assert "You approve as <strong>rita</strong>" in reviewer
    author = _page(Viewer(mode="closed", name="sam", roles=("author",), csrf="c"))
    assert _actions(author) == {"/sagas/s1/edit", "/sign-out"}
    assert "need the reviewer role" in author
    operator = _page(Viewer(mode="closed", name="otto", roles=("operator",), csrf="c"))
    assert _actions(operator) == {"/sagas/s1/cancel", "/sagas/s1/fork", "/sign-out"}


def test_a_terminal_saga_has_no_forms_but_an_operators_fork_and_retry() -> None:
    """Nothing decides a finished saga again; an operator may still fork a version (and retry a failure)."""
    everyone = Viewer(mode="closed", name="a", roles=("author", "reviewer", "operator"), csrf="c")
    done = saga_page({**STATUS, "state": "succeeded"}, VERSION, {"events": []}, token="tok", viewer=everyone)
    assert _actions(done) == {"/sagas/s1/fork", "/sign-out"}
    failed = saga_page({**STATUS, "state": "failed"}, VERSION, {"events": []}, token="tok", viewer=everyone)
    assert _actions(failed) == {"/sagas/s1/fork", "/sagas/s1/retry", "/sign-out"}
    reader = Viewer(mode="closed", name="r", roles=(), csrf="c")
    assert _actions(
        saga_page({**STATUS, "state": "failed"}, VERSION, {"events": []}, token="t", viewer=reader)
    ) == {"/sign-out"}

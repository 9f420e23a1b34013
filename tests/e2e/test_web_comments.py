"""Line comments in a real browser and through the forms an attacker would post.

A `pressroom serve` process in closed mode (its people and saga made in the test's process):
a reviewer comments on the line that carries a citation, sees the comment under
that line, rejects, and the writer's next version has lost that citation's
sentence; the old version keeps its comments, read-only. Screenshots are kept in
each test's tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import SAMPLE_CORPUS, Cli, base_env
from tests.e2e.test_browser_workspace import WIDE, _sign_in, browser  # noqa: F401 (fixture)
from tests.support import in_process
from tests.support.web import form_token, served, tags

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]


@dataclass
class Desk:
    url: str
    tokens: dict[str, str]
    env: dict[str, str]
    cwd: Path
    saga: str

    def as_(self, name: str) -> Cli:
        return Cli({**self.env, "PRESSROOM_TOKEN": self.tokens[name]}, self.cwd)


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    others = {"rita": ["reviewer"], "sam": ["author"]}
    tokens = in_process.add_people(env, tmp_path, others, admin_roles=["admin"])
    saga = in_process.submit(
        env,
        tmp_path,
        brief="history of the library network",
        corpus=SAMPLE_CORPUS,
        destinations=[f"site:{tmp_path / 'site'}"],
        token=tokens["sam"],
    )
    with served(env, tmp_path) as url:
        yield Desk(url, tokens, env, tmp_path, saga)


def _line_of(markdown: str, marker: str) -> int:
    return next(i for i, text in enumerate(markdown.splitlines(), 1) if marker in text)


def _signed_in(desk: Desk, name: str) -> httpx.Client:
    client = httpx.Client(base_url=desk.url, follow_redirects=False, timeout=60)
    page = client.get("/sign-in")
    answer = client.post(
        "/sign-in",
        data={"form_token": form_token(page.text, "/sign-in"), "token": desk.tokens[name], "next": "/"},
        headers={"origin": desk.url},
    )
    assert answer.status_code == 303, answer.text
    return client


def test_a_comment_on_a_cited_line_reaches_the_writer(
    browser: Any,  # noqa: F811 (the imported fixture)
    desk: Desk,
    tmp_path: Path,
) -> None:
    rita = desk.as_("rita")
    v1 = rita.json("show", desk.saga)
    assert v1["version"] == 1
    doomed = v1["citations"][1]
    line = _line_of(v1["markdown"], doomed["marker"])
    remark = f"{doomed['marker']} overstates what the source says"

    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        _sign_in(page, desk.url, desk.tokens["rita"])
        page.goto(f"{desk.url}/sagas/{desk.saga}")
        form = page.locator("form.comment-form")
        form.locator("input[name=line]").fill(str(line))
        form.locator("textarea[name=text]").fill(remark)
        form.locator("button[type=submit]").click()
        page.wait_for_url(f"{desk.url}/sagas/{desk.saga}#line-{line}")
        shown = page.locator(f"#comments tr.comment[data-line='{line}']")
        assert shown.count() == 1
        assert remark in shown.inner_text() and "rita" in shown.inner_text()
        # The comment sits right under its line of the markdown.
        before = shown.inner_text()
        assert page.locator(f"#line-{line} + tr.comment").inner_text() == before
        shown.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "commented.png"), full_page=True)
        page.locator("#comments").screenshot(path=str(tmp_path / "comments.png"))

        page.fill(f"form[action='/sagas/{desk.saga}/reject'] input[name=reason]", "see my line comment")
        page.click(f"form[action='/sagas/{desk.saga}/reject'] button[type=submit]")
        page.wait_for_url(f"{desk.url}/sagas/{desk.saga}?done=rejected")

        # The old version keeps its comment and takes no more.
        page.goto(f"{desk.url}/sagas/{desk.saga}/versions/1")
        assert page.locator(f"#comments tr.comment[data-line='{line}']").inner_text() == before
        assert page.locator("form.comment-form").count() == 0
        assert "its comments are read-only" in page.locator("#comments").inner_text()
        page.screenshot(path=str(tmp_path / "read-only.png"), full_page=True)
    finally:
        context.close()
    assert (tmp_path / "commented.png").stat().st_size > 0 and (tmp_path / "comments.png").stat().st_size > 0

    v2 = rita.json("show", desk.saga)
    assert v2["version"] == 2
    assert doomed["quote"] not in v2["markdown"]
    assert doomed["quote"] not in {c["quote"] for c in v2["citations"]}
    assert v2["citations"]  # only the commented citation went
    events = rita.json("history", desk.saga)["events"]
    commented = [e for e in events if e["kind"] == "comment"]
    assert [(e["actor"], e["detail"]["line"], e["detail"]["text"]) for e in commented] == [
        ("rita", line, remark)
    ]
    rejected = next(e for e in events if e["kind"] == "transition" and e["status"] == "preparing")
    assert [c["text"] for c in rejected["detail"]["comments"]] == [remark]


def test_comment_forms_are_checked_like_the_others(desk: Desk) -> None:
    path = f"/sagas/{desk.saga}/versions/1/comments"
    origin = {"origin": desk.url}

    def body(page: str, **fields: str) -> dict[str, str]:
        return {"form_token": form_token(page, path), "line": "1", "text": "a remark", **fields}

    # Nobody signed in: 401, and nothing is kept.
    anon = httpx.Client(base_url=desk.url, follow_redirects=False, timeout=60)
    try:
        assert anon.post(path, data={"line": "1", "text": "x"}, headers=origin).status_code in (401, 403)
    finally:
        anon.close()

    sam = _signed_in(desk, "sam")  # an author, not a reviewer: no form, and a post is 403
    try:
        page = sam.get(f"/sagas/{desk.saga}").text
        assert not [a for t, a in tags(page) if t == "form" and a.get("action") == path]
        token = next(a["value"] for t, a in tags(page) if t == "input" and a.get("name") == "form_token")
        refused = sam.post(path, data={"form_token": token, "line": "1", "text": "mine"}, headers=origin)
        assert refused.status_code == 403 and "needs the role reviewer" in refused.text
    finally:
        sam.close()

    rita = _signed_in(desk, "rita")
    try:
        page = rita.get(f"/sagas/{desk.saga}").text
        lines = len(desk.as_("rita").json("show", desk.saga)["markdown"].splitlines())
        # No form token, or another site's origin: 403.
        assert rita.post(path, data={"line": "1", "text": "x"}, headers=origin).status_code == 403
        assert rita.post(path, data=body(page), headers={"origin": "http://evil.example"}).status_code == 403
        # Bad input: 400 with one line saying why.
        for fields, why in (
            ({"text": "y" * 2001}, "the comment is 2001 characters; at most 2000 are kept"),
            ({"text": "   "}, "the comment is empty"),
            ({"line": "0"}, f"version 1 has lines 1 to {lines}; there is no line 0"),
            ({"line": str(lines + 1)}, f"there is no line {lines + 1}"),
            ({"line": "two"}, "the line to comment on is a number"),
            ({"line": "9" * 40}, "the line must be a whole number"),
        ):
            answer = rita.post(path, data=body(page, **fields), headers=origin)
            assert answer.status_code == 400 and why in answer.text, (fields, answer.status_code)
            assert "Traceback" not in answer.text
        assert (
            rita.post(f"/sagas/{desk.saga}/versions/7/comments", data=body(page), headers=origin).status_code
            == 404
        )
        # Markup in a comment is shown as text.
        hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
        done = rita.post(path, data=body(page, text=hostile), headers=origin)
        assert done.status_code == 303 and done.headers["location"] == f"/sagas/{desk.saga}#line-1"
        shown = rita.get(f"/sagas/{desk.saga}").text
        assert hostile not in shown and "&lt;script&gt;alert(2)&lt;/script&gt;" in shown
        assert [
            e["detail"]["text"]
            for e in desk.as_("rita").json("history", desk.saga)["events"]
            if e["kind"] == "comment"
        ] == [hostile]

        # Once v1 is not the head, its comments are read-only: 409.
        assert desk.as_("rita").run("reject", desk.saga, "--reason", "drop [1]").returncode == 0
        assert desk.as_("rita").json("show", desk.saga)["version"] == 2
        late = rita.post(path, data=body(page), headers=origin)
        assert late.status_code == 409 and "no longer the head" in late.text
        old = rita.get(f"/sagas/{desk.saga}/versions/1").text
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in old
    finally:
        rita.close()


def test_open_mode_records_the_typed_name(tmp_path: Path) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    cli = Cli(env, tmp_path)
    saga = cli.json(
        "submit",
        "--brief",
        "history of the library network",
        "--corpus",
        str(SAMPLE_CORPUS),
        "--dest",
        f"site:{tmp_path / 'site'}",
        "--as",
        "dana",
    )["saga_id"]
    path = f"/sagas/{saga}/versions/1/comments"
    with served(env, tmp_path) as url, httpx.Client(base_url=url, timeout=60) as client:
        page = client.get(f"/sagas/{saga}").text
        assert "name" in {a.get("name") for t, a in tags(page) if t == "input"}
        fields = {"form_token": form_token(page, path), "line": "1", "text": "title is fine"}
        nameless = client.post(path, data=fields, headers={"origin": url})
        assert nameless.status_code == 400
        done = client.post(
            path, data={**fields, "name": "Olga"}, headers={"origin": url}, follow_redirects=False
        )
        assert done.status_code == 303
    commented = [e for e in cli.json("history", saga)["events"] if e["kind"] == "comment"]
    assert [(e["actor"], e["detail"]["line"]) for e in commented] == [("Olga", 1)]

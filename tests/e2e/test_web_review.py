"""A reviewer's day in a real browser: the landing page is "Waiting for my review" (the
sagas they may approve, the longest waiting first), and approving a version whose
automated review has findings needs a tick for each finding, which the approval records.

A `pressroom serve` process in closed mode; its people and sagas are made in the test's
process (`tests.support.in_process`), the version with findings by `pressroom edit`.
Screenshots are kept in each test's tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from orchestrator.findings import finding_id
from tests.conftest import SAMPLE_CORPUS, Cli, base_env
from tests.e2e.test_browser_workspace import WIDE, _sign_in, browser  # noqa: F401 (fixture)
from tests.support import in_process
from tests.support.web import BRIEF, form_token, served, tags

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]


@dataclass
class Desk:
    url: str
    tokens: dict[str, str]
    env: dict[str, str]
    cwd: Path
    flagged: str  # sam's saga whose head version (v2, sam's edit) has findings
    plain: str  # sam's saga with a clean v1
    eds: str  # ed's saga: ed may not approve it

    def as_(self, name: str) -> Cli:
        return Cli({**self.env, "PRESSROOM_TOKEN": self.tokens[name]}, self.cwd)


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    people = {"rita": ["reviewer"], "sam": ["author"], "ed": ["author", "reviewer"], "otto": ["operator"]}
    tokens = in_process.add_people(env, tmp_path, people)

    def submit(who: str, brief: str) -> str:
        dests = [f"site:{tmp_path / 'site'}"]
        return in_process.submit(
            env, tmp_path, brief=brief, corpus=SAMPLE_CORPUS, destinations=dests, token=tokens[who]
        )

    flagged = submit("sam", BRIEF)
    plain = submit("sam", "The Millbrook bookmobile and its stops")
    eds = submit("ed", "Digital services at the Millbrook library")
    sam = Cli({**env, "PRESSROOM_TOKEN": tokens["sam"]}, tmp_path)
    edited = tmp_path / "v2.md"
    edited.write_text(
        sam.json("show", flagged)["markdown"]
        + "\nA paragraph the author added that cites no source at all.\n",
        encoding="utf-8",
    )
    assert sam.run("edit", flagged, "--file", str(edited)).returncode == 0
    with served(env, tmp_path) as url:
        yield Desk(url, tokens, env, tmp_path, flagged, plain, eds)


def _listed(page: str) -> list[str]:
    found = [a["href"].rsplit("/", 1)[1] for t, a in tags(page) if t == "a" and "title" in a.get("class", "")]
    return list(dict.fromkeys(found))


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


def test_a_reviewer_lands_on_the_sagas_waiting_for_them_oldest_first(
    browser: Any,  # noqa: F811 (the imported fixture)
    desk: Desk,
    tmp_path: Path,
) -> None:
    # sam's edit put `flagged` back in review last: it has waited least.
    expected = {"rita": [desk.plain, desk.eds, desk.flagged], "ed": [desk.plain, desk.flagged]}
    for name, sagas in expected.items():
        client = _signed_in(desk, name)
        try:
            landing = client.get("/")
            assert landing.status_code == 200
            assert "<h1>Waiting for my review</h1>" in landing.text
            assert _listed(landing.text) == sagas  # ed submitted his own: not his to approve
        finally:
            client.close()
    otto = _signed_in(desk, "otto")
    try:
        landing = otto.get("/").text
        assert "<h1>Sagas</h1>" in landing  # an operator without reviewer lands on every saga
        assert set(_listed(landing)) == {desk.flagged, desk.plain, desk.eds}
    finally:
        otto.close()

    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        _sign_in(page, desk.url, desk.tokens["rita"])
        assert page.locator("h1").inner_text() == "Waiting for my review"
        assert page.locator("nav.tabs a.active").inner_text().startswith("Waiting for my review")
        page.screenshot(path=str(tmp_path / "landing.png"), full_page=True)
        page.click("nav.tabs a:has-text('All sagas')")
        page.wait_for_url(desk.url + "/?view=all")
        assert page.locator("h1").inner_text() == "Sagas"
    finally:
        context.close()
    assert (tmp_path / "landing.png").stat().st_size > 0


def test_approving_a_flagged_version_needs_each_finding_ticked(
    browser: Any,  # noqa: F811 (the imported fixture)
    desk: Desk,
    tmp_path: Path,
) -> None:
    shown = desk.as_("rita").json("show", desk.flagged)
    findings = shown["review"]["findings"]
    assert shown["version"] == 2 and findings  # the author's paragraph cites nothing

    rita = _signed_in(desk, "rita")
    try:
        page = rita.get(f"/sagas/{desk.flagged}").text
        boxes = [a for t, a in tags(page) if t == "input" and a.get("name") == "ack"]
        assert sorted(b["value"] for b in boxes) == sorted(finding_id(f) for f in findings)
        body = {"form_token": form_token(page, f"/sagas/{desk.flagged}/approve"), "version": "2"}
        origin = {"origin": desk.url}
        bare = rita.post(f"/sagas/{desk.flagged}/approve", data=body, headers=origin)
        assert bare.status_code == 400 and "tick each finding of version 2" in bare.text
        some = [("ack", finding_id(findings[0]))] if len(findings) > 1 else []
        partly = rita.post(
            f"/sagas/{desk.flagged}/approve",
            content=urlencode([*body.items(), *some, ("ack", "0" * 16)]),
            headers={**origin, "content-type": "application/x-www-form-urlencoded"},
        )
        assert partly.status_code == 400  # a made-up id acknowledges nothing
        assert desk.as_("rita").json("status", desk.flagged)["state"] == "ready-for-review"
    finally:
        rita.close()

    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        _sign_in(page, desk.url, desk.tokens["rita"])
        page.goto(f"{desk.url}/sagas/{desk.flagged}")
        acks = page.locator("#acks input[name=ack]")
        assert acks.count() == len(findings)
        approve = page.locator(f"form[action='/sagas/{desk.flagged}/approve'] button[type=submit]")
        approve.click()  # nothing ticked: the browser keeps the form
        assert page.url == f"{desk.url}/sagas/{desk.flagged}"
        page.locator("#acks").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "acks.png"), full_page=True)
        for i in range(acks.count()):
            acks.nth(i).check()
        approve.click()
        page.wait_for_url(f"{desk.url}/sagas/{desk.flagged}?done=approved")
        page.screenshot(path=str(tmp_path / "approved.png"), full_page=True)
    finally:
        context.close()

    events = desk.as_("rita").json("history", desk.flagged)["events"]
    approval = next(e for e in events if e["kind"] == "transition" and e["status"] == "approved")
    assert approval["actor"] == "rita"
    recorded = approval["detail"]["acknowledged_findings"]
    assert [r["id"] for r in recorded] == [finding_id(f) for f in findings]
    assert [r["rule"] for r in recorded] == [f["rule"] for f in findings]


def test_a_clean_version_has_nothing_to_tick_and_the_cli_is_unchanged(desk: Desk) -> None:
    rita = _signed_in(desk, "rita")
    try:
        page = rita.get(f"/sagas/{desk.plain}").text
        assert not [a for t, a in tags(page) if t == "input" and a.get("name") == "ack"]
        done = rita.post(
            f"/sagas/{desk.plain}/approve",
            data={"form_token": form_token(page, f"/sagas/{desk.plain}/approve"), "version": "1"},
            headers={"origin": desk.url},
        )
        assert done.status_code == 303, done.text
    finally:
        rita.close()
    # The command line approves as its contract says; the approval records no acknowledgement.
    ed = desk.as_("ed").run("approve", desk.flagged, "--version", "2")
    assert ed.returncode == 0, ed.stderr
    events = desk.as_("ed").json("history", desk.flagged)["events"]
    approval = next(e for e in events if e["kind"] == "transition" and e["status"] == "approved")
    assert "acknowledged_findings" not in approval["detail"]

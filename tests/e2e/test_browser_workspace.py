"""The reviewer's workspace in a real browser: headless Chromium (Debian's package at
/usr/bin/chromium) driven by Playwright, against a `pressroom serve` process in
closed mode with people made by the `pressroom users` command.

The reviewer opens the queue, opens a saga, clicks a citation marker and reads
its quote in the source's lines, picks two versions and reads the word diff,
watches a saga move from `preparing` to `ready-for-review` without a reload,
and approves. Each test saves a screenshot in its tmp_path. Without Chromium
or Playwright they are skipped with the reason, and fail under
PRESSROOM_REQUIRE_SERVICES=1 (see `test_browser.py`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from tests.conftest import SAMPLE_CORPUS, Cli, _unavailable
from tests.support.web import people_and_a_saga, served

# A served process, people made by the CLI and a browser: slow on a busy machine, never timed.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]

CHROMIUM = Path(os.environ.get("PRESSROOM_TEST_CHROMIUM", "/usr/bin/chromium"))
WIDE = {"width": 1366, "height": 900}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable("Chromium", f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable("Playwright", str(exc))
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


Closed = tuple[str, dict[str, str], Cli, dict[str, str], str]


@pytest.fixture
def closed(tmp_path: Path) -> Iterator[Closed]:
    env, cli, tokens, saga_id = people_and_a_saga(tmp_path)
    with served(env, tmp_path) as url:
        yield url, env, cli, tokens, saga_id


def _as(env: dict[str, str], cli: Cli, token: str, **extra: str) -> Cli:
    return Cli({**env, "PRESSROOM_TOKEN": token, **extra}, cli.cwd)


def _sign_in(page: Any, url: str, token: str) -> None:
    page.goto(url + "/")
    assert "/sign-in" in page.url
    page.fill("#token", token)
    page.click("form[action='/sign-in'] button[type=submit]")
    page.wait_for_url(url + "/")


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def _errors(page: Any) -> list[str]:
    """Console errors and CSP refusals the page reports (collected from now on)."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.append(str(e)))
    return seen


def test_the_queue_a_citation_and_its_quote(browser: Any, closed: Closed, tmp_path: Path) -> None:
    url, env, cli, tokens, saga_id = closed
    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        errors = _errors(page)
        _sign_in(page, url, tokens["rita"])
        page.click("nav.tabs a:has-text('Waiting for my review')")
        page.wait_for_url(url + "/?view=waiting")
        assert page.locator("table.sagas tr").count() == 2  # the header and sam's saga
        page.screenshot(path=str(tmp_path / "queue.png"), full_page=True)
        page.click(f"table.sagas a.title[href='/sagas/{saga_id}']")
        page.wait_for_url(f"{url}/sagas/{saga_id}")

        marker = page.locator("article.document a.cite").first
        target = marker.get_attribute("href")
        assert target and target.startswith("#q-")
        aside = page.locator(target)
        assert not aside.is_visible()  # closed until its marker is clicked
        marker.click()
        aside.wait_for(state="visible")
        shown = _as(env, cli, tokens["rita"]).json("show", saga_id)
        number = marker.get_attribute("data-marker")
        citation = next(c for c in shown["citations"] if c["marker"] == f"[{number}]")
        assert citation["source"] in aside.inner_text()
        assert citation["source_digest"][:12] in aside.inner_text()
        quoted = " ".join(aside.locator("mark").all_inner_texts())
        assert " ".join(quoted.split()) in " ".join(citation["quote"].split())
        assert len(quoted.split()) >= 3
        assert (
            aside.locator("ol.src li").count() > aside.locator("ol.src li:has(mark)").count()
        )  # lines around it
        box, article = aside.bounding_box(), page.locator("article.document").bounding_box()
        assert box and article and article["y"] < box["y"] < article["y"] + article["height"]  # in place
        assert page.url == f"{url}/sagas/{saga_id}{target}"  # the same page, not another one
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]  # nothing overflows
        page.screenshot(path=str(tmp_path / "quote.png"), full_page=True)
        assert page.locator("svg.timeline rect.bar").count() > 4
        assert not [e for e in errors if "Content Security Policy" in e]
    finally:
        context.close()
    assert (tmp_path / "queue.png").stat().st_size > 0 and (tmp_path / "quote.png").stat().st_size > 0


def test_pick_two_versions_and_read_the_word_diff(browser: Any, closed: Closed, tmp_path: Path) -> None:
    url, env, cli, tokens, saga_id = closed
    sam = _as(env, cli, tokens["sam"])
    first = sam.json("show", saga_id)["markdown"]
    assert "Millbrook" in first
    edited = tmp_path / "v2.md"
    edited.write_text(first.replace("Millbrook", "Millbrook County", 1), encoding="utf-8")
    done = sam.run("edit", saga_id, "--file", str(edited))
    assert done.returncode == 0, done.stderr
    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        _sign_in(page, url, tokens["rita"])
        page.goto(f"{url}/sagas/{saga_id}")
        page.check("table.versions input[name=a][value='1']")
        page.check("table.versions input[name=b][value='2']")
        page.click("form.picker button[type=submit]")
        page.wait_for_url(lambda u: _query(u) == {"a": "1", "b": "2"})
        assert page.locator("table.sbs ins").first.inner_text().strip() == "County"
        assert page.locator("table.sbs del").count() == 0
        changed = page.locator("table.sbs tr.r-change").first
        assert "Millbrook" in changed.locator("td.old").inner_text()
        page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
        # Any two versions, either way round, from the pickers on the diff page itself.
        page.select_option("select[name=a]", "2")
        page.select_option("select[name=b]", "1")
        page.click("form.inline-picker button[type=submit]")
        page.wait_for_url(lambda u: _query(u) == {"a": "2", "b": "1"})
        assert page.url.startswith(f"{url}/sagas/{saga_id}/diff?")
        assert page.locator("table.sbs del").first.inner_text().strip() == "County"
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= WIDE["width"]  # long lines wrap instead of widening the page
    finally:
        context.close()


def test_watch_a_saga_become_ready_then_approve_it(browser: Any, closed: Closed, tmp_path: Path) -> None:
    url, env, cli, tokens, _ = closed
    # Submitted with the broker holding its messages back: it stays `preparing` until delivered.
    held = _as(env, cli, tokens["sam"], PRESSROOM_BROKER_URL="none://")
    saga_id = held.json(
        "submit",
        "--brief",
        "The Millbrook bookmobile and its stops",
        "--corpus",
        str(SAMPLE_CORPUS),
        "--dest",
        f"site:{tmp_path / 'site2'}",
    )["saga_id"]
    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        errors = _errors(page)
        _sign_in(page, url, tokens["rita"])
        page.goto(f"{url}/sagas/{saga_id}")
        assert page.locator("#saga-head .badge").inner_text() == "preparing"
        page.locator("#live-status.on").wait_for(timeout=20_000)  # the stream is open
        page.evaluate("window.notReloaded = true")
        page.screenshot(path=str(tmp_path / "preparing.png"), full_page=True)

        # The saga's agents run now, in this process, on the same database.
        app = build_app(
            Settings(
                database_url=env["PRESSROOM_DATABASE_URL"],
                broker_url="inline://",
                secret=env["PRESSROOM_SECRET"],
            )
        )
        app.relay.run_once()
        app.consumer.drain()

        page.locator("#saga-head .badge:text-is('ready-for-review')").wait_for(timeout=30_000)
        assert page.evaluate("window.notReloaded") is True
        assert page.url == f"{url}/sagas/{saga_id}"
        page.locator("article.document a.cite").first.wait_for()
        assert page.locator("table.versions").inner_text().count("writer") >= 1
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]
        page.screenshot(path=str(tmp_path / "ready.png"), full_page=True)

        page.click("text=Approve v1")
        page.wait_for_url(f"{url}/sagas/{saga_id}?done=approved")
        assert "Approval recorded" in page.inner_text("main")
        page.screenshot(path=str(tmp_path / "approved.png"), full_page=True)
        assert not [e for e in errors if "Content Security Policy" in e]
    finally:
        context.close()
    status = _as(env, cli, tokens["admin"]).json("status", saga_id)
    assert status["state"] == "succeeded" and status["approval"]["approver"] == "rita"

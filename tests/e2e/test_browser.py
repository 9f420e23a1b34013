"""The reviewers' pages in a real browser: headless Chromium (Debian's package at
/usr/bin/chromium) driven by Playwright, against a `pressroom serve` process in
closed mode, with people added and revoked by the `pressroom users` command.

`PRESSROOM_TEST_CHROMIUM` names another binary. Without Chromium or Playwright these tests are skipped with the reason, and
fail under PRESSROOM_REQUIRE_SERVICES=1 (as in CI, where `.ci/run` installs
Chromium when it is missing). Each test saves a screenshot in its tmp_path.
"""

from __future__ import annotations

import contextlib
import html
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, _unavailable
from tests.support.web import people_and_a_saga, served

pytestmark = pytest.mark.e2e

CHROMIUM = Path(os.environ.get("PRESSROOM_TEST_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable("Chromium", f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable("Playwright", str(exc))
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def closed(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Cli, dict[str, str], str]]:
    env, cli, tokens, saga_id = people_and_a_saga(tmp_path)
    with served(env, tmp_path) as url:
        yield url, env, cli, tokens, saga_id


def _admin(env: dict[str, str], cli: Cli, tokens: dict[str, str]) -> Cli:
    return Cli({**env, "PRESSROOM_TOKEN": tokens["admin"]}, cli.cwd)


def _sign_in(page: Any, url: str, token: str) -> None:
    page.goto(url + "/")
    assert "/sign-in" in page.url  # closed mode sends a visitor to sign in first
    page.fill("#token", token)
    page.click("form[action='/sign-in'] button[type=submit]")
    page.wait_for_url(url + "/")


@contextlib.contextmanager
def _attacker_site(body: str) -> Iterator[str]:
    """A page on another origin (another port) that serves `body`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_reviewer_signs_in_and_approves_and_a_visitor_who_did_not_cannot(
    browser: Any, closed: tuple[str, dict[str, str], Cli, dict[str, str], str], tmp_path: Path
) -> None:
    url, env, cli, tokens, saga_id = closed
    reviewer = browser.new_context()
    stranger = browser.new_context()
    try:
        page = reviewer.new_page()
        _sign_in(page, url, tokens["rita"])
        assert "signed in as rita" in page.inner_text("header")
        page.click(f"a[href='/sagas/{saga_id}']")
        page.wait_for_url(f"{url}/sagas/{saga_id}")
        assert page.locator("input[name='name']").count() == 0
        page.click("text=Approve v1")
        page.wait_for_url(f"{url}/sagas/{saga_id}?done=approved")
        assert "Approval recorded" in page.inner_text("main")
        page.screenshot(path=str(tmp_path / "approved.png"), full_page=True)

        other = stranger.new_page()
        other.goto(f"{url}/sagas/{saga_id}")
        assert "/sign-in" in other.url
        assert "Approve" not in other.inner_text("body")
        # Post the approve form from a page of ours anyway, as a script would.
        with other.expect_navigation(url=f"{url}/sagas/{saga_id}/approve"):
            other.evaluate(
                """([action]) => {
                    const form = document.createElement('form');
                    form.method = 'post';
                    form.action = action;
                    for (const [k, v] of [['version', '1'], ['name', 'rita'],
                                          ['form_token', document.querySelector("input[name=form_token]").value]]) {
                        const input = document.createElement('input');
                        input.name = k; input.value = v; form.appendChild(input);
                    }
                    document.body.appendChild(form);
                    form.submit();
                }""",
                [f"/sagas/{saga_id}/approve"],
            )
        assert "not signed in" in other.inner_text("main")
        other.screenshot(path=str(tmp_path / "stranger.png"), full_page=True)
    finally:
        reviewer.close()
        stranger.close()
    status = _admin(env, cli, tokens).json("status", saga_id)
    assert status["state"] == "succeeded"
    assert status["approval"]["approver"] == "rita"
    assert (tmp_path / "approved.png").stat().st_size > 0


def test_a_forged_cross_origin_form_is_refused(
    browser: Any, closed: tuple[str, dict[str, str], Cli, dict[str, str], str], tmp_path: Path
) -> None:
    url, env, cli, tokens, saga_id = closed
    context = browser.new_context()
    try:
        page = context.new_page()
        _sign_in(page, url, tokens["rita"])
        page.goto(f"{url}/sagas/{saga_id}")
        # The worst case: the attacker even knows the reviewer's form token.
        token = page.get_attribute(f"form[action='/sagas/{saga_id}/approve'] input[name=form_token]", "value")
        assert token
        forged = (
            "<!doctype html><body onload='document.forms[0].submit()'>"
            f'<form method="post" action="{html.escape(url)}/sagas/{html.escape(saga_id)}/approve">'
            f'<input name="form_token" value="{html.escape(token)}"><input name="version" value="1">'
            "</form></body>"
        )
        with _attacker_site(forged) as evil:
            attack = context.new_page()
            with attack.expect_navigation(url=f"{url}/sagas/{saga_id}/approve"):
                attack.goto(evil)
            assert "another site" in attack.inner_text("main")
            attack.screenshot(path=str(tmp_path / "forged.png"), full_page=True)
    finally:
        context.close()
    status = _admin(env, cli, tokens).json("status", saga_id)
    assert status["state"] == "ready-for-review"
    assert status["approval"] is None


def test_after_users_revoke_the_session_stops_working(
    browser: Any, closed: tuple[str, dict[str, str], Cli, dict[str, str], str], tmp_path: Path
) -> None:
    url, env, cli, tokens, saga_id = closed
    context = browser.new_context()
    try:
        page = context.new_page()
        _sign_in(page, url, tokens["rita"])
        page.goto(f"{url}/sagas/{saga_id}")
        assert page.locator("text=Approve v1").count() == 1

        done = _admin(env, cli, tokens).run("users", "revoke", "rita")
        assert done.returncode == 0, done.stderr

        with page.expect_navigation(url=f"{url}/sagas/{saga_id}/approve"):
            page.click("text=Approve v1")  # the form loaded before the revoke
        assert "session has ended" in page.inner_text("main")
        page.screenshot(path=str(tmp_path / "revoked.png"), full_page=True)
        page.goto(f"{url}/sagas/{saga_id}")
        assert "/sign-in" in page.url
    finally:
        context.close()
    status = _admin(env, cli, tokens).json("status", saga_id)
    assert status["state"] == "ready-for-review"
    assert status["approval"] is None

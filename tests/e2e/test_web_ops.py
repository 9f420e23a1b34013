"""The operators' day in a real browser: reconcile an `effect-unknown` saga from its page,
retry a failed one, see only the buttons the state and the role allow, and follow the
saga's trace link.

A `pressroom serve` process in closed mode, people made in the test's process
(`tests.support.in_process`), a real webhook receiver (`tests.support.webhook_server`)
that applies a publish and drops the connection while its status query is down, so the saga ends `effect-unknown`; then the
status query comes back and the operator reads what it says on the reconcile page.
Screenshots are kept in each test's tmp_path.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import SAMPLE_CORPUS, Cli, base_env
from tests.e2e.test_browser_workspace import WIDE, _errors, _sign_in, browser  # noqa: F401 (fixture)
from tests.support import in_process
from tests.support.web import BRIEF, form_token, served, tags
from tests.support.webhook_server import WebhookServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]

TRACE_URL = "http://jaeger.example:16686/trace/{trace_id}"


@dataclass
class Site:
    url: str
    env: dict[str, str]
    cli: Cli
    tokens: dict[str, str]
    hook: WebhookServer
    trace_file: Path

    def as_(self, name: str) -> Cli:
        return Cli({**self.env, "PRESSROOM_TOKEN": self.tokens[name]}, self.cli.cwd)

    def submit(self, *dests: str) -> str:
        args = [arg for d in dests for arg in ("--dest", d)]
        sid: str = self.as_("sam").json("submit", "--brief", BRIEF, "--corpus", str(SAMPLE_CORPUS), *args)[
            "saga_id"
        ]
        return sid


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    trace_file = tmp_path / "spans.jsonl"
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
        PRESSROOM_BROKER_URL="inline://",
        PRESSROOM_DESTINATION_TIMEOUT="1",
        PRESSROOM_TRACE_URL=TRACE_URL,
        PRESSROOM_TRACE_FILE=str(trace_file),
        OTEL_TRACES_EXPORTER="file",
    )
    cli = Cli(env, tmp_path)
    tokens = in_process.add_people(
        env, tmp_path, {"rita": ["reviewer"], "sam": ["author"], "otto": ["operator"]}
    )
    with WebhookServer("drop", status=False) as hook, served(env, tmp_path) as url:
        yield Site(url, env, cli, tokens, hook, trace_file)


def _unknown(site: Site) -> str:
    """A saga whose one webhook applied the publish but never answered: effect-unknown."""
    sid = site.submit(f"webhook:{site.hook.url}")
    done = site.as_("rita").run("approve", sid, "--version", "1")
    assert done.returncode == 6, done.stderr  # approved; the publish it started ended effect-unknown
    assert site.as_("otto").json("status", sid)["state"] == "effect-unknown"
    assert site.hook.posts == 1
    site.hook.status_supported = True  # the receiver's status query answers again
    return sid


def _signed_in(site: Site, name: str) -> httpx.Client:
    client = httpx.Client(base_url=site.url, follow_redirects=False, timeout=60)
    page = client.get("/sign-in")
    answer = client.post(
        "/sign-in",
        data={"form_token": form_token(page.text, "/sign-in"), "token": site.tokens[name], "next": "/"},
        headers={"origin": site.url},
    )
    assert answer.status_code == 303, answer.text
    return client


def _actions(page: str) -> set[str]:
    """The paths the page's forms post to."""
    return {attrs.get("action", "") for tag, attrs in tags(page) if tag == "form"}


def test_an_operator_reconciles_from_the_page_after_reading_the_destination(
    browser: Any,  # noqa: F811 (the imported fixture)
    site: Site,
    tmp_path: Path,
) -> None:
    sid = _unknown(site)
    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        errors = _errors(page)
        _sign_in(page, site.url, site.tokens["otto"])
        page.goto(f"{site.url}/sagas/{sid}")
        hint = page.locator("#settle-hint code.command").inner_text()
        assert hint == (
            f"pressroom reconcile {sid} --dest webhook:{site.hook.url} "
            "--outcome confirmed|absent --as NAME --reason TEXT"
        )
        page.click("#reconcile-link")
        page.wait_for_url(f"{site.url}/sagas/{sid}/reconcile")
        section = page.locator("section.reconcile")
        assert section.count() == 1
        answer = section.locator("td.answer").inner_text()
        assert "applied" in answer and "wh-1" in answer  # the receiver's own receipt id
        assert section.locator("input[value=confirmed]").is_checked()  # what the destination says
        page.screenshot(path=str(tmp_path / "reconcile.png"), full_page=True)

        section.locator("input[name=reason]").fill("the receiver shows receipt wh-1 for this key")
        section.locator("button[type=submit]").click()
        page.wait_for_url(f"{site.url}/sagas/{sid}?done=reconciled")
        assert "Reconciled" in page.locator("p.notice").inner_text()
        page.screenshot(path=str(tmp_path / "reconciled.png"), full_page=True)
        assert not [e for e in errors if "Content Security Policy" in e]
    finally:
        context.close()

    status = site.as_("otto").json("status", sid)
    assert status["state"] == "succeeded"
    assert status["destinations"][0]["receipt"]["id"] == "wh-1"
    assert site.hook.posts == 1  # confirmed: the destination was never called again
    events = site.as_("otto").json("history", sid)["events"]
    asked = [e for e in events if e["tool"] == "publish.status" and e["actor"] == "otto"]
    assert asked and asked[0]["status"] == "ok"  # asked through the tool path, as otto
    settled = [e for e in events if e["kind"] == "transition" and e["actor"] == "otto"]
    assert any("reconciled confirmed: the receiver shows receipt wh-1" in json.dumps(e) for e in settled)
    assert (tmp_path / "reconcile.png").stat().st_size > 0


def test_the_hint_on_the_page_is_a_command_that_works(site: Site) -> None:
    sid = _unknown(site)
    otto = _signed_in(site, "otto")
    try:
        page = otto.get(f"/sagas/{sid}").text
    finally:
        otto.close()
    start = page.index('<code class="command">') + len('<code class="command">')
    command = shlex.split(page[start : page.index("</code>", start)].replace("&amp;", "&"))
    assert command[:2] == ["pressroom", "reconcile"]
    filled = [
        {"confirmed|absent": "absent", "NAME": "otto", "TEXT": "the operator removed it by hand"}.get(a, a)
        for a in command[1:]
    ]
    site.hook.applied.clear()  # the receiver no longer holds it: absent is the truth
    site.hook.receipts.clear()
    site.hook.set_mode("normal")
    done = site.as_("otto").run(*filled)
    assert done.returncode == 0, done.stderr
    assert site.as_("otto").json("status", sid)["state"] == "succeeded"  # absent: published again


def test_only_an_operator_reconciles_and_forged_forms_change_nothing(site: Site) -> None:
    sid = _unknown(site)
    rita, otto = _signed_in(site, "rita"), _signed_in(site, "otto")
    try:
        assert rita.get(f"/sagas/{sid}/reconcile").status_code == 403  # not even asked: no role
        rita_page = rita.get(f"/sagas/{sid}").text
        assert f"/sagas/{sid}/reconcile" not in rita_page.split("settle-hint")[0]
        assert not {f"/sagas/{sid}/{a}" for a in ("cancel", "retry", "fork")} & _actions(rita_page)
        refused = rita.post(
            f"/sagas/{sid}/reconcile",
            data={
                "form_token": form_token(rita_page),
                "dest": f"webhook:{site.hook.url}",
                "outcome": "confirmed",
                "reason": "r",
            },
            headers={"origin": site.url},
        )
        assert refused.status_code == 403, refused.text

        page = otto.get(f"/sagas/{sid}/reconcile").text
        body = {
            "form_token": form_token(page, f"/sagas/{sid}/reconcile"),
            "dest": f"webhook:{site.hook.url}",
            "outcome": "confirmed",
            "reason": "seen",
        }
        forged = otto.post(f"/sagas/{sid}/reconcile", data={**body, "form_token": "x" * 64})
        assert forged.status_code == 403
        elsewhere = otto.post(
            f"/sagas/{sid}/reconcile", data=body, headers={"origin": "https://evil.example"}
        )
        assert elsewhere.status_code == 403
        with httpx.Client(base_url=site.url, timeout=30) as nobody:
            anonymous = nobody.post(f"/sagas/{sid}/reconcile", data=body, headers={"origin": site.url})
            assert anonymous.status_code == 401
        bad = otto.post(
            f"/sagas/{sid}/reconcile", data={**body, "outcome": "maybe"}, headers={"origin": site.url}
        )
        assert bad.status_code == 400 and "--outcome must be confirmed or absent" in bad.text
        no_reason = otto.post(
            f"/sagas/{sid}/reconcile", data={**body, "reason": " "}, headers={"origin": site.url}
        )
        assert no_reason.status_code == 400
        assert site.as_("otto").json("status", sid)["state"] == "effect-unknown"  # nothing changed

        done = otto.post(f"/sagas/{sid}/reconcile", data=body, headers={"origin": site.url})
        assert done.status_code == 303 and done.headers["location"].endswith("?done=reconciled")
        again = otto.post(f"/sagas/{sid}/reconcile", data=body, headers={"origin": site.url})
        assert again.status_code == 409  # settled already: shown again with the refusal
    finally:
        rita.close()
        otto.close()


def test_retry_cancel_and_fork_are_offered_as_the_state_allows(
    browser: Any,  # noqa: F811 (the imported fixture)
    site: Site,
    tmp_path: Path,
) -> None:
    site.hook.set_mode("reject")
    failed = site.submit(f"webhook:{site.hook.url}")
    assert site.as_("rita").run("approve", failed, "--version", "1").returncode == 6
    waiting = site.submit(f"site:{tmp_path / 'site'}")
    otto, rita = _signed_in(site, "otto"), _signed_in(site, "rita")
    try:
        forms = _actions(otto.get(f"/sagas/{failed}").text)
        assert {f"/sagas/{failed}/retry", f"/sagas/{failed}/fork"} <= forms
        assert f"/sagas/{failed}/cancel" not in forms  # a failed saga cannot be cancelled
        forms = _actions(otto.get(f"/sagas/{waiting}").text)
        assert {f"/sagas/{waiting}/cancel", f"/sagas/{waiting}/fork"} <= forms
        assert f"/sagas/{waiting}/retry" not in forms  # nothing failed
        assert f"/sagas/{waiting}/approve" not in forms  # an operator, not a reviewer
        page = rita.get(f"/sagas/{failed}").text
        assert not {f"/sagas/{failed}/{a}" for a in ("retry", "fork", "cancel")} & _actions(page)
        forged = rita.post(
            f"/sagas/{failed}/retry", data={"form_token": form_token(page)}, headers={"origin": site.url}
        )
        assert forged.status_code == 403  # the role, checked by the service
    finally:
        otto.close()
        rita.close()

    site.hook.set_mode("normal")
    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        _sign_in(page, site.url, site.tokens["otto"])
        page.goto(f"{site.url}/sagas/{failed}")
        page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
        page.click(f"form[action='/sagas/{failed}/retry'] button[type=submit]")
        page.wait_for_url(f"{site.url}/sagas/{failed}?done=retried")
        assert "succeeded" in page.locator("#saga-head .badge").first.inner_text()
        assert page.locator(f"form[action='/sagas/{failed}/retry']").count() == 0  # nothing to retry now
        assert page.locator(f"form[action='/sagas/{failed}/cancel']").count() == 0
        page.screenshot(path=str(tmp_path / "retried.png"), full_page=True)
    finally:
        context.close()


def test_the_saga_page_links_its_trace(site: Site) -> None:
    sid = site.submit(f"site:{site.cli.cwd / 'site'}")
    rita = _signed_in(site, "rita")
    try:
        page = rita.get(f"/sagas/{sid}").text
    finally:
        rita.close()
    links = [a for tag, a in tags(page) if tag == "a" and a.get("id") == "trace-link"]
    assert len(links) == 1
    trace_id = links[0]["href"].rsplit("/", 1)[1]
    assert links[0]["href"] == TRACE_URL.replace("{trace_id}", trace_id)
    spans = [json.loads(line) for line in site.trace_file.read_text().splitlines() if line.strip()]
    saga_traces = {s["trace_id"] for s in spans if s["attributes"].get("pressroom.saga.id") == sid}
    assert trace_id in saga_traces  # the id the saga's spans were exported under

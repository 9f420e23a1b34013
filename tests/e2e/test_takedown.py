"""`pressroom takedown`: an operator takes one destination's page of a succeeded saga
down, with a reason, through the console script. The undo is the compensation's own
(`publish.compensate`, key `undo-…`): the site page goes, the git repository gets a revert
commit, the webhook gets its DELETE. The step ends `compensated`, the saga stays
`succeeded`, the history names the person and the reason, and `audit verify` agrees."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Cli, base_env
from tests.e2e.test_browser_workspace import WIDE, _errors, _sign_in, browser  # noqa: F401 (fixture)
from tests.e2e.test_people_cli import BRIEF, People, one_line_error
from tests.support import in_process
from tests.support.web import form_token, served, tags
from tests.support.webhook_server import ReferenceReceiver, WebhookServer


@pytest.fixture(params=["sqlite", "postgresql"])
def people(request: pytest.FixtureRequest, tmp_path: Path) -> People:
    url = (
        f"sqlite:///{tmp_path / 'db.sqlite'}"
        if request.param == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    return People(Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp_path))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _step(status: dict[str, Any], uri: str) -> dict[str, Any]:
    found: dict[str, Any] = next(d for d in status["destinations"] if d["uri"] == uri)
    return found


def _history(p: People, sid: str, token: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = p.json("history", sid, token=token)["events"]
    return events


def test_an_operator_takes_the_site_and_git_pages_down(people: People, corpus: Path) -> None:
    p = people
    env, cwd = p.cli.env, p.cli.cwd
    # The people and the published saga are made in this process; the takedown is the command's.
    p.tokens = in_process.add_people(
        env, cwd, {"dana": ["author"], "erin": ["reviewer"], "olga": ["operator"]}
    )
    site, repo = cwd / "site", cwd / "repo"
    _git(cwd, "init", "-q", str(repo))
    site_uri, git_uri = f"site:{site}", f"git:{repo}"
    dests = [site_uri, git_uri]
    sid = in_process.submit(env, cwd, brief=BRIEF, corpus=corpus, destinations=dests, token=p.tokens["dana"])
    in_process.approve(env, cwd, sid, version=1, token=p.tokens["erin"])
    status = p.json("status", sid, token=p.tokens["olga"])
    assert status["state"] == "succeeded"
    page = Path(_step(status, site_uri)["receipt"]["path"])
    assert page.is_file()
    published = _step(status, git_uri)["receipt"]["commit"]
    take = ("takedown", sid, "--dest", site_uri, "--reason", "legal asked us to")

    # Not an operator, or nobody: refused in one line, and the page stays.
    for token in (p.tokens["erin"], p.tokens["dana"]):
        refused = p.run(*take, token=token)
        assert refused.returncode == 4 and "needs the role operator" in refused.stderr, refused.stderr
        one_line_error(refused)
    nobody = p.run(*take)
    assert nobody.returncode == 4, nobody.stderr
    one_line_error(nobody)
    assert page.is_file()
    # Bad input: one line, exit 2.
    empty = p.run("takedown", sid, "--dest", site_uri, "--reason", "  ", token=p.tokens["olga"])
    assert empty.returncode == 2, empty.stderr
    one_line_error(empty)
    stranger = p.run("takedown", sid, "--dest", "site:/elsewhere", "--reason", "x", token=p.tokens["olga"])
    assert stranger.returncode == 2 and "is not a destination of saga" in stranger.stderr, stranger.stderr
    one_line_error(stranger)
    claimed = p.run(*take, "--as", "erin", token=p.tokens["olga"])
    assert claimed.returncode == 2, claimed.stderr  # --as must name the caller
    assert (
        p.run(
            "takedown", "nosuchsaga", "--dest", site_uri, "--reason", "x", token=p.tokens["olga"]
        ).returncode
        == 3
    )

    out = p.json(*take, token=p.tokens["olga"])
    assert out["state"] == "succeeded"
    assert out["takedown"] == {"destination": site_uri, "step": "compensated", "reason": "legal asked us to"}
    assert _step(out, site_uri)["state"] == "compensated" and _step(out, git_uri)["state"] == "done"
    assert not page.exists() and not page.with_suffix(".html").exists()

    again = p.run(*take, token=p.tokens["olga"])
    assert again.returncode == 4 and "already taken down" in again.stderr, again.stderr
    one_line_error(again)

    p.json("takedown", sid, "--dest", git_uri, "--reason", "all of it", token=p.tokens["olga"])
    log = _git(repo, "log", "--format=%H %s")
    head_sha, head_subject = log.splitlines()[0].split(" ", 1)
    assert head_subject.startswith("Revert") and head_sha != published, log
    assert _git(repo, "ls-tree", "--name-only", "HEAD").strip() == ""  # the page is gone from HEAD

    status = p.json("status", sid, token=p.tokens["olga"])
    assert status["state"] == "succeeded"  # no saga state is added: the steps say what is down
    assert {d["uri"]: d["state"] for d in status["destinations"]} == {
        site_uri: "compensated",
        git_uri: "compensated",
    }
    events = _history(p, sid, p.tokens["olga"])
    downs = [e for e in events if e["kind"] == "saga" and e["status"] == "taken_down"]
    assert [(e["actor"], e["detail"]["destination"]) for e in downs] == [
        ("olga", site_uri),
        ("olga", git_uri),
    ]
    assert downs[0]["detail"]["reason"] == "takedown by olga: legal asked us to"
    # The undo is the compensation's own tool call, under the step's `undo-` key, as olga.
    keys = {_step(status, uri)["idempotency_key"] for uri in (site_uri, git_uri)}
    undos = [e for e in events if e["kind"] == "tool_call" and e["tool"] == "publish.compensate"]
    assert {e["detail"]["key"] for e in undos} == {"undo-" + key for key in keys}, undos
    assert all(e["actor"] == "olga" and e["status"] == "ok" for e in undos), undos
    verified = p.run("audit", "verify", sid, token=p.tokens["olga"])
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_only_a_succeeded_saga_has_pages_to_take_down(tmp_path: Path, corpus: Path) -> None:
    cli = Cli(
        base_env(
            PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
        ),
        tmp_path,
    )
    dest = f"site:{tmp_path / 'site'}"
    sid = cli.json("submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", dest, "--as", "dana")[
        "saga_id"
    ]
    early = cli.run("takedown", sid, "--dest", dest, "--reason", "too soon", "--as", "olga")
    assert early.returncode == 4 and "ready-for-review" in early.stderr, early.stderr
    one_line_error(early)
    nameless = cli.run("takedown", sid, "--dest", dest, "--reason", "who?")
    assert nameless.returncode == 2, nameless.stderr  # open mode: --as names the person
    assert cli.run("audit", "verify", sid).returncode == 0


def test_an_undo_that_times_out_leaves_the_step_compensation_failed(tmp_path: Path, corpus: Path) -> None:
    """The destination holds its answer to the DELETE past the timeout: maybe undone. The step is
    `compensation-failed` with the reason, the saga stays `succeeded`; a takedown again settles it."""
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
        PRESSROOM_BROKER_URL="inline://",
        PRESSROOM_DESTINATION_TIMEOUT="0.5",
    )
    cli = Cli(env, tmp_path)
    with WebhookServer(stall_seconds=3.0) as hook:
        dest = f"webhook:{hook.url}"
        sid = cli.json("submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", dest, "--as", "dana")[
            "saga_id"
        ]
        cli.json("approve", sid, "--version", "1", "--as", "erin")
        key = cli.json("status", sid)["destinations"][0]["idempotency_key"]
        assert key in hook.applied
        hook.delete_mode = "stall"
        stalled = cli.run("takedown", sid, "--dest", dest, "--reason", "recall", "--as", "olga")
        assert stalled.returncode == 4 and "compensation-failed" in stalled.stderr, stalled.stderr
        one_line_error(stalled)
        status = cli.json("status", sid)
        assert status["state"] == "succeeded" and status["destinations"][0]["state"] == "compensation-failed"
        assert cli.run("audit", "verify", sid).returncode == 0
        hook.release()
        hook.delete_mode = "normal"
        settled = cli.json("takedown", sid, "--dest", dest, "--reason", "recall, again", "--as", "olga")
        assert settled["destinations"][0]["state"] == "compensated"
        assert key not in hook.applied
        assert hook.requests["DELETE"] == 2
    events = cli.json("history", sid)["events"]
    failed = [e for e in events if e["kind"] == "step" and e["status"] == "compensation-failed"]
    assert failed and failed[0]["detail"]["reason"].startswith("takedown by olga: "), failed
    assert cli.run("audit", "verify", sid).returncode == 0


# -- the web form -------------------------------------------------------------------


def _signed_in(url: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=url, follow_redirects=False, timeout=60)
    page = client.get("/sign-in")
    answer = client.post(
        "/sign-in",
        data={"form_token": form_token(page.text, "/sign-in"), "token": token, "next": "/"},
        headers={"origin": url},
    )
    assert answer.status_code == 303, answer.text
    return client


@pytest.mark.timeout(360)
def test_an_operator_takes_a_page_down_from_the_saga_page(
    browser: Any,  # noqa: F811 (the imported fixture)
    tmp_path: Path,
    corpus: Path,
) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    tokens = in_process.add_people(
        env, tmp_path, {"rita": ["reviewer"], "sam": ["author"], "otto": ["operator"]}
    )

    def as_(name: str) -> Cli:
        return Cli({**env, "PRESSROOM_TOKEN": tokens[name]}, tmp_path)

    dest = f"site:{tmp_path / 'site'}"
    sid = in_process.submit(
        env, tmp_path, brief=BRIEF, corpus=corpus, destinations=[dest], token=tokens["sam"]
    )
    in_process.approve(env, tmp_path, sid, version=1, token=tokens["rita"])
    page_file = Path(as_("otto").json("status", sid)["destinations"][0]["receipt"]["path"])
    assert page_file.is_file()
    action = f"/sagas/{sid}/takedown"

    with served(env, tmp_path) as url:
        rita = _signed_in(url, tokens["rita"])
        try:
            rita_page = rita.get(f"/sagas/{sid}").text
            assert action not in {attrs.get("action") for tag, attrs in tags(rita_page) if tag == "form"}
            refused = rita.post(
                action,
                data={"form_token": form_token(rita_page), "dest": dest, "reason": "mine"},
                headers={"origin": url},
            )
            assert refused.status_code == 403, refused.text
        finally:
            rita.close()
        assert page_file.is_file()

        context = browser.new_context(viewport=WIDE)
        try:
            page = context.new_page()
            errors = _errors(page)
            _sign_in(page, url, tokens["otto"])
            page.goto(f"{url}/sagas/{sid}")
            form = page.locator(f"form[action='{action}']")
            assert form.count() == 1
            form.locator("input[name=reason]").fill("the source withdrew its consent")
            page.screenshot(path=str(tmp_path / "takedown.png"), full_page=True)
            form.locator("button[type=submit]").click()
            page.wait_for_url(f"{url}/sagas/{sid}?done=taken-down")
            assert page.locator(f"form[action='{action}']").count() == 0  # nothing left to take down
            page.screenshot(path=str(tmp_path / "taken-down.png"), full_page=True)
            assert not [e for e in errors if "Content Security Policy" in e]
        finally:
            context.close()

    assert not page_file.exists()
    status = as_("otto").json("status", sid)
    assert status["state"] == "succeeded" and status["destinations"][0]["state"] == "compensated"
    events = as_("otto").json("history", sid)["events"]
    downs = [e for e in events if e["status"] == "taken_down"]
    assert [(e["actor"], e["detail"]["reason"]) for e in downs] == [
        ("otto", "takedown by otto: the source withdrew its consent")
    ]
    assert as_("otto").run("audit", "verify", sid).returncode == 0
    assert (tmp_path / "takedown.png").stat().st_size > 0


def test_the_reference_receiver_deletes_the_document(tmp_path: Path, corpus: Path) -> None:
    cli = Cli(
        base_env(
            PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
        ),
        tmp_path,
    )
    with ReferenceReceiver(tmp_path) as receiver:
        dest = f"webhook:{receiver.url()}"
        sid = cli.json("submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", dest, "--as", "dana")[
            "saga_id"
        ]
        cli.json("approve", sid, "--version", "1", "--as", "erin")
        key = cli.json("status", sid)["destinations"][0]["idempotency_key"]
        assert receiver.stored() == {key}
        out = cli.json("takedown", sid, "--dest", dest, "--reason", "recalled", "--as", "olga")
        assert out["destinations"][0]["state"] == "compensated" and out["state"] == "succeeded"
        assert receiver.keys("undone") == [key] and receiver.stored() == set()
    assert cli.run("audit", "verify", sid).returncode == 0

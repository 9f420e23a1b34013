"""The operators' `/ops` page in a real browser, over a real Redis and a real worker
process, and `saga=<id>` in that worker's log lines.

Closed mode on PostgreSQL; a worker runs the writer, reviewer and publisher queues but
not the researcher's, so a submitted saga's research waits on Redis. The operator's page
shows that queue's depth, the open work with its lease, the worker (it answered Celery's
`ping` just now), and the saga stuck in `preparing` waiting on that work. A reviewer gets
403. Then a researcher worker starts, and its log names the saga on the task's lines.
Screenshots are kept in the test's tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.celery_app import make_celery
from tests.conftest import SAMPLE_CORPUS, Cli, base_env
from tests.e2e.test_browser_workspace import WIDE, _errors, _sign_in, browser  # noqa: F401 (fixture)
from tests.support.processes import Processes, wait_until
from tests.support.web import BRIEF, free_port, served, tags

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

DOWNSTREAM = "writer,reviewer,publisher"


@dataclass
class OpsSite:
    url: str
    env: dict[str, str]
    tokens: dict[str, str]
    procs: Processes
    tmp_path: Path

    def as_(self, name: str) -> Cli:
        return Cli({**self.env, "PRESSROOM_TOKEN": self.tokens[name]}, self.tmp_path)


@pytest.fixture
def ops_site(tmp_path: Path, pg_url: str, redis_url: str) -> Iterator[OpsSite]:
    env = base_env(PRESSROOM_DATABASE_URL=pg_url, PRESSROOM_BROKER_URL=redis_url)
    cli = Cli(env, tmp_path)
    every = [arg for role in ("admin", "author", "reviewer", "operator") for arg in ("--role", role)]
    tokens = {"admin": cli.json("users", "add", "admin", *every)["token"]}
    admin = Cli({**env, "PRESSROOM_TOKEN": tokens["admin"]}, tmp_path)
    for name, role in (("rita", "reviewer"), ("sam", "author"), ("otto", "operator")):
        tokens[name] = admin.json("users", "add", name, "--role", role)["token"]
    procs = Processes(env, tmp_path)
    try:
        procs.worker("worker-downstream", DOWNSTREAM)
        celery = make_celery(redis_url)
        wait_until(
            lambda: bool(celery.control.inspect(timeout=1).ping()), timeout=90, what="the worker answers ping"
        )
        with served(env, tmp_path) as url:
            yield OpsSite(url, env, tokens, procs, tmp_path)
    except BaseException:
        print(procs.logs())
        raise
    finally:
        procs.stop_all()


def _text(page: Any, selector: str) -> str:
    return str(page.inner_text(selector))


def test_the_operator_sees_queues_workers_and_stuck_sagas(
    browser: Any,  # noqa: F811 (fixture)
    ops_site: OpsSite,
    tmp_path: Path,
) -> None:
    sid = ops_site.as_("sam").json(
        "submit", "--brief", BRIEF, "--corpus", str(SAMPLE_CORPUS), "--dest", f"site:{tmp_path / 'site'}"
    )["saga_id"]

    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        errors = _errors(page)
        _sign_in(page, ops_site.url, ops_site.tokens["otto"])
        answer = page.goto(ops_site.url + "/ops")
        assert answer is not None and answer.status == 200
        page.screenshot(path=str(tmp_path / "ops.png"), full_page=True)

        researcher = _text(page, "#queue-researcher")
        assert "1 message" in _text(page, "#queue-researcher td.depth")
        assert "pressroom.researcher.research: 1, oldest" in researcher and "lease ends in" in researcher
        assert _text(page, "#queue-writer td.depth") == "0 messages"
        assert "none" in _text(page, "#queue-writer td.work")

        workers = page.locator("#workers tr.worker")
        assert workers.count() == 1
        row = _text(page, "#workers tr.worker")
        assert "pressroom-writer-reviewer-publisher@" in row and "ping: just now" in row and "solo" in row
        assert "idle" in row

        stuck = page.locator("#state-preparing + table tr.stuck-saga")
        assert stuck.count() == 1
        assert sid in stuck.inner_text() and "work pressroom.researcher.research" in stuck.inner_text()
        assert page.locator(f"#state-preparing + table a[href='/sagas/{sid}']").count() == 1
        assert not [e for e in errors if "Content Security Policy" in e or "Uncaught" in e]
    finally:
        context.close()

    # A reviewer is signed in but is not an operator: 403, and none of the page.
    context = browser.new_context(viewport=WIDE)
    try:
        page = context.new_page()
        _sign_in(page, ops_site.url, ops_site.tokens["rita"])
        answer = page.goto(ops_site.url + "/ops")
        assert answer is not None and answer.status == 403
        assert "needs the role operator" in page.content()
        assert page.locator("#queues").count() == 0
        page.screenshot(path=str(tmp_path / "ops-reviewer.png"), full_page=True)
    finally:
        context.close()

    # Nobody signed in is sent to sign in first.
    away = httpx.get(ops_site.url + "/ops", follow_redirects=False, timeout=10)
    assert away.status_code == 303 and away.headers["location"].startswith("/sign-in")

    # The research runs in a worker of its own; its log lines for the task name the saga.
    researcher_worker = ops_site.procs.worker("worker-researcher", "researcher")
    wait_until(
        lambda: (
            f"saga={sid}" in researcher_worker.output()
            and "pressroom.researcher.research" in researcher_worker.output()
        ),
        timeout=120,
        what="the researcher worker's log naming the saga",
    )
    lines = researcher_worker.output().splitlines()
    named = [line for line in lines if f"saga={sid}" in line]
    assert any("succeeded" in line and "pressroom.researcher.research" in line for line in named), named
    assert not any("saga=" in line for line in lines if "Connected to" in line or "ready." in line)


def test_the_inline_broker_has_no_separate_workers(tmp_path: Path) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    with served(env, tmp_path) as url:
        page = httpx.get(url + "/ops", timeout=10)
    assert page.status_code == 200
    assert "in-process (no separate workers)" in page.text
    assert '<td class="depth">in-process</td>' in page.text


def test_a_broker_that_is_down_is_a_line_on_the_page_not_an_error(tmp_path: Path) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    env = base_env(PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL=dead)
    cli = Cli(env, tmp_path)
    # The submit commits its saga and outbox row; the broker does not take the row.
    submitted = cli.run(
        "submit",
        "--brief",
        BRIEF,
        "--corpus",
        str(SAMPLE_CORPUS),
        "--dest",
        f"site:{tmp_path / 'site'}",
        "--as",
        "dana",
        "--json",
    )
    assert submitted.returncode == 0, submitted.stderr
    with served(env, tmp_path) as url:
        page = httpx.get(url + "/ops", timeout=30)
    assert page.status_code == 200
    problem = [attrs for tag, attrs in tags(page.text) if attrs.get("id") == "broker-problem"]
    assert problem and "the broker did not answer" in page.text and "Traceback" not in page.text
    assert '<td class="depth">unknown</td>' in page.text
    assert '<td class="unsent">1, oldest' in page.text

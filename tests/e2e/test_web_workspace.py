"""The workspace pages over HTTP: the list's filters, search and pages, "waiting for my
review" in closed mode, the live stream through sign-in, and hostile text in the new places.

Open-mode tests drive the app built by `bootstrap.build_app` through Starlette's
test client (the in-process broker runs each submit to ready-for-review); the
closed-mode ones talk to a `pressroom serve` process with people made by the
`pressroom users` console script.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.entrypoints.http import create_app
from orchestrator.pressroom import Pressroom
from tests.conftest import SAMPLE_CORPUS, Cli
from tests.support.web import form_token, people_and_a_saga, served, tags

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]


@dataclass
class Open:
    app: Pressroom
    client: TestClient
    site: Path

    def submit(self, brief: str, who: str = "sam") -> dict[str, Any]:
        body = {
            "brief": brief,
            "corpus": str(SAMPLE_CORPUS),
            "destinations": [f"site:{self.site}"],
            "as": who,
        }
        answer = self.client.post("/api/sagas", json=body)
        assert answer.status_code == 201, answer.text
        out: dict[str, Any] = answer.json()
        return out


@pytest.fixture
def open_site(tmp_path: Path) -> Iterator[Open]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite", broker_url="inline://", secret="s")
    app = build_app(settings)
    with TestClient(create_app(app)) as client:
        yield Open(app, client, tmp_path / "site")


def _listed(page: str) -> list[str]:
    """The saga ids the list page links to, in order, once each."""
    found = [a["href"].rsplit("/", 1)[1] for t, a in tags(page) if t == "a" and "title" in a.get("class", "")]
    return list(dict.fromkeys(found))


def _next(page: str) -> str | None:
    return next(
        (html.unescape(a["href"]) for t, a in tags(page) if t == "a" and a.get("rel") == "next"), None
    )


def test_the_list_filters_by_state_searches_and_pages(open_site: Open) -> None:
    c = open_site.client
    first = open_site.submit("The Millbrook bookmobile and its stops")["saga_id"]
    second = open_site.submit("The central library building history")["saga_id"]
    third = open_site.submit("Digital services at the Millbrook library")["saga_id"]
    approved = c.post(f"/api/sagas/{second}/approve", json={"version": 1, "as": "rita"})
    assert approved.status_code == 200, approved.text

    assert _listed(c.get("/").text) == [third, second, first]  # newest first
    assert _listed(c.get("/?state=ready-for-review").text) == [third, first]
    assert _listed(c.get("/?state=succeeded").text) == [second]
    assert _listed(c.get("/?view=waiting").text) == [first, third]  # the longest waiting first
    waiting = c.get("/?view=waiting&limit=1")
    assert _listed(waiting.text) == [first]
    following = _next(waiting.text)
    assert following and _listed(c.get(following).text) == [third]  # the cursor goes on by ready_at
    assert _listed(c.get("/?q=BOOKMOBILE").text) == [first]  # the brief, any case
    assert _listed(c.get("/?q=" + second[:8]).text) == [second]  # an id prefix
    title = open_site.client.get(f"/api/sagas/{third}").json()["title"]
    word = next(w for w in title.split() if len(w) > 4)
    assert third in _listed(c.get("/", params={"q": word}).text)  # the head version's title
    assert _listed(c.get("/?q=100%25").text) == []  # LIKE wildcards are literal
    assert "No saga matches" in c.get("/?q=zzzz").text

    page = c.get("/?limit=2")
    assert _listed(page.text) == [third, second]
    following = _next(page.text)
    assert following and "limit=2" in following and "after=" in following
    rest = c.get(following)
    assert _listed(rest.text) == [first] and _next(rest.text) is None
    assert "← Newest" in rest.text
    filtered = c.get("/?state=ready-for-review&limit=1")
    assert _listed(filtered.text) == [third]
    then = _next(filtered.text)
    assert then and "state=ready-for-review" in then
    assert _listed(c.get(then).text) == [first]

    for bad in ("/?state=nonsense", "/?after=not-a-cursor", "/?limit=0", "/?limit=x", "/?view=mine"):
        answer = c.get(bad)
        assert answer.status_code == 400, bad
        assert 'class="error"' in answer.text
    assert c.get(f"/sagas/{first}/diff?a=1&b=x").status_code == 400
    assert c.get(f"/sagas/{first}/diff?a=1&b=9").status_code == 404


def test_hostile_titles_names_and_sources_are_text_in_the_new_places(open_site: Open, tmp_path: Path) -> None:
    hostile = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    saga = open_site.submit(f"The Millbrook bookmobile {hostile}", who=f"eve {hostile}")
    saga_id = saga["saga_id"]
    shown = open_site.client.get(f"/api/sagas/{saga_id}/versions/1").json()
    edited = tmp_path / "v2.md"
    edited.write_text(f"# Bookmobile {hostile}\n\n" + shown["markdown"].split("\n", 1)[1], encoding="utf-8")
    open_site.app.reviews.edit(saga_id, path=str(edited), actor=f"erin {hostile}")
    for path in (
        "/",
        "/?view=waiting",
        "/?q=" + saga_id[:8],
        f"/sagas/{saga_id}",
        f"/sagas/{saga_id}/diff?a=1&b=2",
    ):
        page = open_site.client.get(path)
        assert page.status_code == 200, path
        for tag, attrs in tags(page.text):
            assert tag != "img", (path, attrs)
            assert tag != "script" or attrs.get("src") == "/static/workspace.js", (path, attrs)
            assert not any(name.startswith("on") for name in attrs), (path, tag, attrs)
        assert html.escape(hostile) in page.text, path
    saga_page = open_site.client.get(f"/sagas/{saga_id}").text
    assert html.escape(f"erin {hostile}") in saga_page  # the versions list
    svg = [
        attrs for tag, attrs in tags(saga_page) if tag == "rect" and "bar" in attrs.get("class", "").split()
    ]
    kinds = {attrs["class"].split()[1] for attrs in svg}
    assert {"k-queue", "k-proposal", "k-ack", "k-approval"} <= kinds  # queue waits, phases, the review wait
    assert "queue → researcher" in saga_page and "review wait 2" in saga_page  # the edit waits again
    policy = open_site.client.get(f"/sagas/{saga_id}").headers["content-security-policy"]
    assert (
        "script-src 'nonce-" in policy
        and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    )
    assert "script-src" not in open_site.client.get("/").headers["content-security-policy"]


@dataclass
class Closed:
    url: str
    env: dict[str, str]
    cli: Cli
    tokens: dict[str, str]
    saga_id: str


@pytest.fixture
def closed(tmp_path: Path) -> Iterator[Closed]:
    env, cli, tokens, saga_id = people_and_a_saga(tmp_path)
    with served(env, tmp_path) as url:
        yield Closed(url, env, cli, tokens, saga_id)


def _signed_in(site: Closed, name: str) -> httpx.Client:
    client = httpx.Client(base_url=site.url, follow_redirects=False, timeout=60)
    page = client.get("/sign-in")
    answer = client.post(
        "/sign-in",
        data={"form_token": form_token(page.text, "/sign-in"), "token": site.tokens[name], "next": "/"},
        headers={"origin": site.url},
    )
    assert answer.status_code == 303, answer.text
    return client


def test_waiting_for_my_review_and_the_live_stream_in_closed_mode(closed: Closed) -> None:
    rita, sam, otto = (_signed_in(closed, name) for name in ("rita", "sam", "otto"))
    try:
        assert _listed(rita.get("/?view=waiting").text) == [closed.saga_id]
        assert _listed(sam.get("/?view=waiting").text) == []  # sam submitted it: not his to approve
        assert _listed(otto.get("/?view=waiting").text) == []  # otto holds no reviewer role
        assert _listed(sam.get("/?view=all").text) == [closed.saga_id]  # all sagas still lists it
        assert _listed(sam.get("/").text) == []  # a reviewer lands on the sagas waiting for them
        assert _listed(rita.get("/").text) == [closed.saga_id]
        assert _listed(otto.get("/").text) == [closed.saga_id]  # no reviewer role: lands on all sagas
        assert "Waiting for my review" in rita.get("/").text

        with rita.stream("GET", f"/sagas/{closed.saga_id}/live", params={"since": "stale"}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = []
            for line in stream.iter_lines():
                lines.append(line)
                if line.startswith("data:"):
                    break
        assert "event: moved" in lines and any(line.startswith("id: ") for line in lines)
    finally:
        for client in (rita, sam, otto):
            client.close()
    with httpx.Client(base_url=closed.url, timeout=30) as anonymous:
        assert anonymous.get(f"/sagas/{closed.saga_id}/live").status_code == 401
        assert anonymous.get("/?view=waiting", follow_redirects=False).status_code == 303

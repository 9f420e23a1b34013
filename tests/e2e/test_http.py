"""`pressroom serve` end to end: the JSON API and the reviewers' pages over a real app.

Each test builds the app through `bootstrap.build_app` on a fresh SQLite file
with the in-process broker, so a submit runs research, writing and review
before it answers, and an approval publishes before its redirect.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.entrypoints.http import create_app
from orchestrator.pressroom import Pressroom
from tests.support.web import tags

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "roles" / "sample_corpus"
BRIEF = "The history of the Millbrook library branches and the bookmobile"


@dataclass
class Env:
    app: Pressroom
    client: TestClient
    site: Path

    def submit(self, brief: str = BRIEF) -> dict[str, Any]:
        body = {"brief": brief, "corpus": str(CORPUS), "destinations": [f"site:{self.site}"], "as": "sam"}
        response = self.client.post("/api/sagas", json=body)
        assert response.status_code == 201, response.text
        out: dict[str, Any] = response.json()
        return out

    def status(self, saga_id: str) -> dict[str, Any]:
        response = self.client.get(f"/api/sagas/{saga_id}")
        assert response.status_code == 200, response.text
        out: dict[str, Any] = response.json()
        return out

    def form_token(self, saga_id: str) -> str:
        page = self.client.get(f"/sagas/{saga_id}")
        assert page.status_code == 200
        match = re.search(r'name="form_token" value="([^"]+)"', page.text)
        assert match, "the saga page carries no form token"
        return match.group(1)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite", broker_url="inline://", secret="test-secret"
    )
    app = build_app(settings)
    with TestClient(create_app(app)) as client:
        yield Env(app=app, client=client, site=tmp_path / "site")


def test_submit_review_approve_on_the_page_and_publish(env: Env) -> None:
    submitted = env.submit()
    saga_id = submitted["saga_id"]
    assert submitted["state"] == "ready-for-review"
    assert submitted["version"] == 1

    listing = env.client.get("/")
    assert listing.status_code == 200
    assert saga_id[:12] in listing.text
    assert "ready-for-review" in listing.text
    assert env.client.get("/api/sagas").json()["sagas"][0]["saga_id"] == saga_id

    shown = env.client.get(f"/api/sagas/{saga_id}/versions/1").json()
    page = env.client.get(f"/sagas/{saga_id}")
    assert page.status_code == 200
    assert shown["version_digest"] == submitted["version_digest"]
    assert submitted["version_digest"] in page.text
    assert shown["citations"], "the writer cited nothing"
    for citation in shown["citations"]:
        assert html.escape(citation["quote"]) in page.text
        assert citation["source_digest"][:12] in page.text
    assert shown["review"]["verdict"] == "pass"
    assert 'Verdict <span class="badge t-good">pass</span>' in page.text
    assert "Flagged sources" in page.text and "friends-book-sale.md" in page.text
    assert '<input type="hidden" name="version" value="1">' in page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]

    token = env.form_token(saga_id)
    answer = env.client.post(
        f"/sagas/{saga_id}/approve",
        data={"form_token": token, "version": "1", "name": "rita", "expires_in": "1h"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/sagas/{saga_id}?done=approved"

    status = env.status(saga_id)
    assert status["state"] == "succeeded"
    assert status["approval"]["approver"] == "rita"
    [destination] = status["destinations"]
    assert destination["state"] == "done"
    published = Path(destination["receipt"]["path"])
    assert published.is_file()
    assert published.resolve().is_relative_to(env.site.resolve())
    assert hashlib.sha256(published.read_bytes()).hexdigest() == status["version_digest"]

    after = env.client.get(answer.headers["location"])
    assert "Approval recorded" in after.text
    assert "succeeded" in after.text
    assert html.escape(destination["receipt"]["path"]) in after.text

    history = env.client.get(f"/api/sagas/{saga_id}/history").json()
    assert history["saga_id"] == saga_id
    assert any(e["status"] == "approved" or e.get("tool") == "site.publish" for e in history["events"])


def test_the_author_cannot_approve_and_nothing_is_published(env: Env) -> None:
    saga_id = env.submit()["saga_id"]
    author = env.client.get(f"/api/sagas/{saga_id}/versions/1").json()["author"]
    assert author == "writer"

    answer = env.client.post(
        f"/sagas/{saga_id}/approve",
        data={"form_token": env.form_token(saga_id), "version": "1", "name": author},
        follow_redirects=False,
    )
    assert answer.status_code == 403  # DESIGN "People and permissions": self-approval is HTTP 403
    assert 'role="alert"' in answer.text
    assert "Not yours to approve:" in answer.text and "cannot approve" in answer.text
    assert "SelfApproval" not in answer.text, "a person reads words, not a class name"
    assert 'value="writer"' in answer.text  # the form is shown again with what was typed

    status = env.status(saga_id)
    assert status["state"] == "ready-for-review"
    assert status["approval"] is None
    assert not env.site.exists()


def test_a_stale_version_is_refused_on_the_api_and_the_page(env: Env) -> None:
    saga_id = env.submit()["saga_id"]
    token = env.form_token(saga_id)  # the reviewer opened the page while v1 was the head

    rejected = env.client.post(
        f"/api/sagas/{saga_id}/reject", json={"as": "rita", "reason": "citation [2] says too little"}
    )
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["version"] == 2
    assert rejected.json()["state"] == "ready-for-review"

    api = env.client.post(f"/api/sagas/{saga_id}/approve", json={"version": 1, "as": "rita"})
    assert api.status_code == 409
    assert api.json()["kind"] == "StaleVersion"
    assert "not the head" in api.json()["error"]

    page = env.client.post(
        f"/sagas/{saga_id}/approve",
        data={"form_token": token, "version": "1", "name": "rita"},
        follow_redirects=False,
    )
    assert page.status_code == 409
    assert "Out of date:" in page.text and "StaleVersion" not in page.text
    assert '<input type="hidden" name="version" value="2">' in page.text  # now bound to what is shown

    old = env.client.get(f"/sagas/{saga_id}/versions/1")
    assert old.status_code == 200
    assert "not the head version" in old.text
    assert 'name="version"' not in old.text

    diff = env.client.get(f"/api/sagas/{saga_id}/diff/1/2")
    assert diff.status_code == 200
    assert diff.headers["content-type"].startswith("text/plain")
    assert env.client.get(f"/sagas/{saga_id}/diff/1/2").status_code == 200

    status = env.status(saga_id)
    assert status["state"] == "ready-for-review"
    assert status["approval"] is None
    assert not env.site.exists()


def test_unknown_saga_is_404_on_the_api_and_the_pages(env: Env) -> None:
    api = env.client.get("/api/sagas/nosuchsaga")
    assert api.status_code == 404
    assert api.json() == {"error": "no saga 'nosuchsaga'", "kind": "NotFound"}
    assert env.client.get("/api/sagas/nosuchsaga/versions/1").status_code == 404
    assert env.client.get("/api/nothing-here").json()["kind"] == "NotFound"

    page = env.client.get("/sagas/nosuchsaga")
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "no saga" in page.text

    saga_id = env.submit()["saga_id"]
    assert env.client.get(f"/sagas/{saga_id}/versions/9").status_code == 404
    form = env.client.post(
        "/sagas/nosuchsaga/approve",
        data={"form_token": env.form_token(saga_id), "version": "1", "name": "rita"},
        follow_redirects=False,
    )
    assert form.status_code == 404


def test_bad_request_bodies_are_400_or_415(env: Env) -> None:
    json_headers = {"content-type": "application/json"}
    bad = env.client.post("/api/sagas", content=b"{not json", headers=json_headers)
    assert bad.status_code == 400
    assert bad.json()["kind"] == "InvalidInput"

    assert env.client.post("/api/sagas", content=b"[1, 2]", headers=json_headers).status_code == 400
    missing = env.client.post("/api/sagas", json={"brief": "x", "corpus": str(CORPUS)})
    assert missing.status_code == 400
    assert "destinations" in missing.json()["error"]
    typo = env.client.post(
        "/api/sagas",
        json={"brief": "x", "corpus": str(CORPUS), "destinations": ["site:/tmp/x"], "actor": "sam"},
    )
    assert typo.status_code == 400
    assert env.client.post("/api/sagas/abc/approve", json={"version": "1", "as": "rita"}).status_code == 400

    # What a cross-site HTML form can send (text/plain shaped as JSON) is refused.
    forged = env.client.post(
        "/api/sagas/abc/approve",
        content=b'{"version": 1, "as": "mallory", "x": "="}',
        headers={"content-type": "text/plain"},
    )
    assert forged.status_code == 415

    empty = env.client.post("/api/sagas", json={"brief": " ", "corpus": str(CORPUS), "destinations": []})
    assert empty.status_code == 400
    assert empty.json() == {"error": "the brief is empty", "kind": "InvalidInput"}


def test_markup_in_a_brief_is_escaped_on_the_pages(env: Env) -> None:
    saga_id = env.submit(brief="<script>alert('x')</script> Millbrook library branches")["saga_id"]
    for path in ("/", f"/sagas/{saga_id}", f"/sagas/{saga_id}/versions/1"):
        page = env.client.get(path)
        assert page.status_code == 200
        # The only script is the page's own, from this site, with the response's nonce.
        scripts = [attrs for tag, attrs in tags(page.text) if tag == "script"]
        assert all(a.get("src") == "/static/workspace.js" and a.get("nonce") for a in scripts), path
        assert "<script>alert" not in page.text.lower(), path
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in env.client.get(f"/sagas/{saga_id}").text


def test_a_form_without_the_right_token_is_refused(env: Env) -> None:
    saga_id = env.submit()["saga_id"]
    for data in (
        {"version": "1", "name": "rita"},
        {"form_token": "guessed", "version": "1", "name": "rita"},
    ):
        answer = env.client.post(f"/sagas/{saga_id}/approve", data=data, follow_redirects=False)
        assert answer.status_code == 403
    reject = env.client.post(
        f"/sagas/{saga_id}/reject", data={"name": "rita", "reason": "no"}, follow_redirects=False
    )
    assert reject.status_code == 403
    status = env.status(saga_id)
    assert status["state"] == "ready-for-review"
    assert status["version"] == 1
    assert status["approval"] is None


def test_reject_on_the_page_makes_a_new_version(env: Env) -> None:
    saga_id = env.submit()["saga_id"]
    answer = env.client.post(
        f"/sagas/{saga_id}/reject",
        data={"form_token": env.form_token(saga_id), "name": "rita", "reason": "drop [1], it is out of date"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert env.status(saga_id)["version"] == 2
    empty = env.client.post(
        f"/sagas/{saga_id}/reject",
        data={"form_token": env.form_token(saga_id), "name": "rita", "reason": " "},
        follow_redirects=False,
    )
    assert empty.status_code == 400
    assert "reason" in empty.text


def test_only_allowed_host_headers_are_served(tmp_path: Path) -> None:
    app = build_app(
        Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite", broker_url="inline://", secret="test-secret")
    )
    asgi = create_app(app, allowed_hosts={"127.0.0.1", "localhost", "::1"})
    with TestClient(asgi, base_url="http://127.0.0.1:8080") as local:
        assert local.get("/api/sagas").status_code == 200
    with TestClient(asgi, base_url="http://[::1]:8080") as local6:
        assert local6.get("/").status_code == 200
    with TestClient(asgi, base_url="http://rebound.example:8080") as foreign:
        assert foreign.get("/api/sagas").status_code == 400


def test_cancel_and_reconcile_follow_the_contract(env: Env) -> None:
    saga_id = env.submit()["saga_id"]
    settle = env.client.post(
        f"/api/sagas/{saga_id}/reconcile",
        json={"destination": f"site:{env.site}", "outcome": "confirmed", "as": "rita", "reason": "checked"},
    )
    assert settle.status_code == 409, settle.text  # nothing is uncertain
    bad = env.client.post(
        f"/api/sagas/{saga_id}/reconcile",
        json={"destination": f"site:{env.site}", "outcome": "maybe", "as": "rita", "reason": "checked"},
    )
    assert bad.status_code == 400

    cancelled = env.client.post(f"/api/sagas/{saga_id}/cancel", json={"as": "rita"})
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    again = env.client.post(f"/api/sagas/{saga_id}/approve", json={"version": 1, "as": "rita"})
    assert again.status_code == 409
    page = env.client.get(f"/sagas/{saga_id}")
    assert 'name="version"' not in page.text  # no approve form on a cancelled saga


def test_an_operator_forks_and_retries_from_the_page(env: Env) -> None:
    saga_id = env.submit()["saga_id"]
    page = env.client.get(f"/sagas/{saga_id}")
    assert f'action="/sagas/{saga_id}/fork"' in page.text
    assert f'action="/sagas/{saga_id}/retry"' not in page.text, "nothing to retry in ready-for-review"

    refused = env.client.post(
        f"/sagas/{saga_id}/retry", data={"form_token": env.form_token(saga_id), "name": "olga"}
    )
    assert "cannot retry a saga that is ready-for-review" in refused.text

    forked = env.client.post(
        f"/sagas/{saga_id}/fork",
        data={"form_token": env.form_token(saga_id), "fork_version": "1", "name": "olga"},
        follow_redirects=False,
    )
    assert forked.status_code == 303, forked.text
    new_id = forked.headers["location"].split("/sagas/", 1)[1].split("?", 1)[0]
    assert forked.headers["location"].endswith("?done=forked") and new_id != saga_id
    assert env.status(new_id)["state"] == "ready-for-review"
    assert env.status(new_id)["version_digest"] == env.status(saga_id)["version_digest"]
    bad = env.client.post(
        f"/sagas/{saga_id}/fork",
        data={"form_token": env.form_token(saga_id), "fork_version": "two", "name": "olga"},
    )
    assert "the version to fork is a number" in bad.text

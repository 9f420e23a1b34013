"""Web sign-in in closed mode, tried from outside: a `pressroom serve` process over a
socket, people added and revoked with the `pressroom users` console script.

What is checked: who may read and act on the pages, the cookie's flags, the
origin and form-token checks on every form POST, that `users revoke` and
sign-out end a session on its next request, and that a trusted proxy's user
header counts only from a trusted peer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import Cli, base_env
from tests.support.web import field_names, form_token, people_and_a_saga, served

pytestmark = pytest.mark.e2e


@dataclass
class Site:
    url: str
    env: dict[str, str]
    cli: Cli
    tokens: dict[str, str]
    saga_id: str
    db: Path
    site_dir: Path

    def client(self, **headers: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, follow_redirects=False, timeout=60, headers=headers)

    def as_user(self, name: str) -> Cli:
        return Cli({**self.env, "PRESSROOM_TOKEN": self.tokens[name]}, self.cli.cwd)

    def state(self) -> str:
        return str(self.as_user("admin").json("status", self.saga_id)["state"])


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    env, cli, tokens, saga_id = people_and_a_saga(tmp_path)
    with served(env, tmp_path) as url:
        yield Site(url, env, cli, tokens, saga_id, tmp_path / "db.sqlite", tmp_path / "site")


def sign_in(site: Site, client: httpx.Client, name: str) -> httpx.Response:
    page = client.get("/sign-in")
    assert page.status_code == 200
    answer = client.post(
        "/sign-in",
        data={"form_token": form_token(page.text, "/sign-in"), "token": site.tokens[name], "next": "/"},
        headers={"origin": site.url},
    )
    assert answer.status_code == 303, answer.text
    return answer


def approve(
    site: Site, client: httpx.Client, *, origin: str | None = None, token: str | None = None
) -> httpx.Response:
    page = client.get(f"/sagas/{site.saga_id}")
    assert page.status_code == 200, page.text[:300]
    sent = token if token is not None else form_token(page.text)
    headers = {"origin": origin if origin is not None else site.url}
    return client.post(
        f"/sagas/{site.saga_id}/approve", data={"form_token": sent, "version": "1"}, headers=headers
    )


def test_nobody_signed_in_is_sent_to_sign_in_and_cannot_post(site: Site) -> None:
    with site.client() as anon:
        for path in ("/", f"/sagas/{site.saga_id}", f"/sagas/{site.saga_id}/versions/1"):
            answer = anon.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/sign-in?next=%2F")
        page = anon.get("/sign-in")
        assert 'href="/sign-in"' in page.text  # the header offers sign-in, names nobody
        assert "signed in as" not in page.text
        forged = anon.post(
            f"/sagas/{site.saga_id}/approve",
            data={"form_token": form_token(page.text), "version": "1", "name": "rita"},
            headers={"origin": site.url},
        )
        assert forged.status_code == 401
        assert "not signed in" in forged.text
        wrong = anon.post(
            "/sign-in",
            data={"form_token": form_token(page.text), "token": "pr_" + "x" * 43},
            headers={"origin": site.url},
        )
        assert wrong.status_code == 401
        assert "unknown or revoked" in wrong.text
        assert "set-cookie" not in wrong.headers
    assert site.state() == "ready-for-review"


def test_a_reviewer_signs_in_approves_as_herself_and_the_saga_is_published(site: Site) -> None:
    with site.client() as rita:
        cookie = sign_in(site, rita, "rita").headers["set-cookie"]
        flags = {part.strip().lower() for part in cookie.split(";")}
        assert {"httponly", "samesite=strict", "path=/"} <= flags
        assert "secure" not in flags  # plain http on loopback
        page = rita.get(f"/sagas/{site.saga_id}")
        assert "signed in as <strong>rita</strong> (reviewer)" in page.text
        assert "name" not in field_names(page.text)  # the signed-in user acts; no name to type
        answer = approve(site, rita)
        assert answer.status_code == 303, answer.text
    status = site.as_user("admin").json("status", site.saga_id)
    assert status["state"] == "succeeded"
    assert status["approval"]["approver"] == "rita"
    with sqlite3.connect(site.db) as db:
        rows = db.execute(
            "select e.auth_method, u.name from events e join users u on u.id = e.principal_id "
            "where e.saga_id = ? and e.kind = 'transition' and e.status = 'approved'",
            (site.saga_id,),
        ).fetchall()
    assert rows == [("session", "rita")]


def test_forged_and_tokenless_posts_are_refused_even_with_the_cookie(site: Site) -> None:
    with site.client() as rita:
        sign_in(site, rita, "rita")
        assert approve(site, rita, origin="https://evil.example").status_code == 403
        assert approve(site, rita, origin="null").status_code == 403
        assert approve(site, rita, token="").status_code == 403
        assert approve(site, rita, token="guessed").status_code == 403
        page = rita.get(f"/sagas/{site.saga_id}")
        no_origin = rita.post(
            f"/sagas/{site.saga_id}/approve", data={"form_token": form_token(page.text), "version": "1"}
        )
        assert no_origin.status_code == 403  # closed mode needs Origin or Referer
        evil_referer = rita.post(
            f"/sagas/{site.saga_id}/approve",
            data={"form_token": form_token(page.text), "version": "1"},
            headers={"referer": "https://evil.example/form.html"},
        )
        assert evil_referer.status_code == 403
        other_name = rita.post(
            f"/sagas/{site.saga_id}/approve",
            data={"form_token": form_token(page.text), "version": "1", "name": "otto"},
            headers={"origin": site.url},
        )
        assert other_name.status_code == 400
    with site.client() as otto:  # another user's form token does not fit rita's session
        sign_in(site, otto, "otto")
        otto_token = form_token(otto.get(f"/sagas/{site.saga_id}").text)
    with site.client() as rita:
        sign_in(site, rita, "rita")
        assert approve(site, rita, token=otto_token).status_code == 403
    assert site.state() == "ready-for-review"
    assert not site.site_dir.exists()


def test_roles_and_separation_of_duties_are_403(site: Site) -> None:
    with site.client() as otto:
        sign_in(site, otto, "otto")
        page = otto.get(f"/sagas/{site.saga_id}")
        assert "need the reviewer role" in page.text
        assert f'action="/sagas/{site.saga_id}/approve"' not in page.text
        refused = approve(site, otto)
        assert refused.status_code == 403
        assert "Not permitted:" in refused.text and "NotPermitted" not in refused.text
    with site.client() as sam:  # sam is a reviewer, but submitted the saga
        sign_in(site, sam, "sam")
        refused = approve(site, sam)
        assert refused.status_code == 403
        assert "Not yours to approve:" in refused.text
    assert site.state() == "ready-for-review"


def test_users_revoke_and_sign_out_end_a_session_at_once(site: Site) -> None:
    with site.client() as rita, site.client() as otto:
        sign_in(site, rita, "rita")
        sign_in(site, otto, "otto")
        rita_page = rita.get(f"/sagas/{site.saga_id}")
        assert rita_page.status_code == 200

        done = site.as_user("admin").run("users", "revoke", "rita")
        assert done.returncode == 0, done.stderr
        assert rita.get("/").status_code == 303
        late = rita.post(
            f"/sagas/{site.saga_id}/approve",
            data={"form_token": form_token(rita_page.text), "version": "1"},
            headers={"origin": site.url},
        )
        assert late.status_code == 401

        old_cookie = otto.cookies.get("pressroom_session")
        page = otto.get("/")
        out = otto.post(
            "/sign-out", data={"form_token": form_token(page.text, "/sign-out")}, headers={"origin": site.url}
        )
        assert out.status_code == 303
        assert otto.cookies.get("pressroom_session") is None
    with site.client() as replay:
        replay.cookies.set("pressroom_session", str(old_cookie))
        assert replay.get("/").status_code == 303  # the ended session does not come back
        replay.cookies.set("pressroom_session", str(old_cookie)[:-2] + "xx")
        assert replay.get("/").status_code == 303
    assert site.state() == "ready-for-review"


def test_the_sign_in_form_itself_is_guarded(site: Site) -> None:
    with site.client() as anon:
        page = anon.get("/sign-in?next=https://evil.example/")
        assert 'name="next" value="/"' in page.text
        data = {"form_token": form_token(page.text), "token": site.tokens["rita"]}
        assert anon.post("/sign-in", data=data, headers={"origin": "https://evil.example"}).status_code == 403
        assert (
            anon.post("/sign-in", data={**data, "form_token": "x"}, headers={"origin": site.url}).status_code
            == 403
        )
        ok = anon.post("/sign-in", data={**data, "next": "//evil.example/"}, headers={"origin": site.url})
        assert ok.status_code == 303
        assert ok.headers["location"] == "/"


def test_a_trusted_proxy_names_the_user_and_sets_https(tmp_path: Path) -> None:
    env, cli, tokens, saga_id = people_and_a_saga(
        tmp_path,
        PRESSROOM_TRUSTED_PROXY_HEADER="X-Forwarded-User",
        PRESSROOM_TRUSTED_PROXIES="127.0.0.0/8, ::1",
    )
    with served(env, tmp_path) as url:
        public = "https://review.example"
        proxied = {"x-forwarded-proto": "https", "x-forwarded-host": "review.example", "host": "127.0.0.1"}
        with httpx.Client(base_url=url, follow_redirects=False, timeout=60, headers=proxied) as proxy:
            page = proxy.get(f"/sagas/{saga_id}", headers={"x-forwarded-user": "rita"})
            assert page.status_code == 200
            assert "signed in as <strong>rita</strong>" in page.text
            assert 'action="/sign-out"' not in page.text  # the proxy signs people in and out
            nobody = proxy.get("/", headers={"x-forwarded-user": "mallory"})
            assert nobody.status_code == 303
            token = form_token(page.text)
            plain_origin = proxy.post(
                f"/sagas/{saga_id}/approve",
                data={"form_token": token, "version": "1"},
                headers={"x-forwarded-user": "rita", "origin": url},
            )
            assert plain_origin.status_code == 403  # the browser's origin is the proxy's https one
            answer = proxy.post(
                f"/sagas/{saga_id}/approve",
                data={"form_token": token, "version": "1"},
                headers={"x-forwarded-user": "rita", "origin": public},
            )
            assert answer.status_code == 303, answer.text
            sign_in_page = proxy.get("/sign-in")
            signed = proxy.post(
                "/sign-in",
                data={"form_token": form_token(sign_in_page.text), "token": tokens["otto"]},
                headers={"origin": public},
            )
            assert signed.status_code == 303
            assert "secure" in {p.strip().lower() for p in signed.headers["set-cookie"].split(";")}
    status = Cli({**env, "PRESSROOM_TOKEN": tokens["admin"]}, tmp_path).json("status", saga_id)
    assert status["state"] == "succeeded"
    with sqlite3.connect(tmp_path / "db.sqlite") as db:
        [(auth,)] = db.execute(
            "select auth_method from events where saga_id = ? and kind = 'transition' and status = 'approved'",
            (saga_id,),
        ).fetchall()
    assert auth == "proxy"


def test_proxy_headers_from_an_untrusted_peer_are_ignored(tmp_path: Path) -> None:
    env, cli, tokens, saga_id = people_and_a_saga(
        tmp_path, PRESSROOM_TRUSTED_PROXY_HEADER="X-Forwarded-User", PRESSROOM_TRUSTED_PROXIES="10.9.9.9"
    )
    with served(env, tmp_path) as url, httpx.Client(base_url=url, follow_redirects=False, timeout=60) as c:
        spoofed = {"x-forwarded-user": "rita", "x-forwarded-proto": "https", "x-forwarded-for": "10.9.9.9"}
        assert c.get("/", headers=spoofed).status_code == 303
        page = c.get("/sign-in", headers=spoofed)
        signed = c.post(
            "/sign-in",
            data={"form_token": form_token(page.text), "token": tokens["rita"]},
            headers={**spoofed, "origin": url},
        )
        assert signed.status_code == 303
        assert "secure" not in {p.strip().lower() for p in signed.headers["set-cookie"].split(";")}


def test_open_mode_says_so_in_the_header(tmp_path: Path) -> None:
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    with served(env, tmp_path) as url:
        page = httpx.get(url + "/", timeout=60)
        assert page.status_code == 200
        [line] = [ln for ln in page.text.splitlines() if "open mode" in ln]
        assert line.startswith("<header>")
        sign_in_page = httpx.get(url + "/sign-in", timeout=60)
        assert "no one to sign in as" in sign_in_page.text
        assert "Token" not in sign_in_page.text


def test_edit_and_cancel_forms_act_as_the_signed_in_author_and_operator(site: Site) -> None:
    saga = f"/sagas/{site.saga_id}"
    with site.client() as rita:
        sign_in(site, rita, "rita")
        page = rita.get(saga).text
        assert f'action="{saga}/edit"' not in page and f'action="{saga}/cancel"' not in page
        token = form_token(page)
        for action, data in (("edit", {"markdown": "# Mine\n\nText.\n"}), ("cancel", {})):
            refused = rita.post(
                f"{saga}/{action}", data={"form_token": token, **data}, headers={"origin": site.url}
            )
            assert refused.status_code == 403, action
            assert "Not permitted:" in refused.text and "NotPermitted" not in refused.text
    with site.client() as sam:
        sign_in(site, sam, "sam")
        page = sam.get(saga).text
        assert f'action="{saga}/edit"' in page and "<textarea" in page
        edited = sam.post(
            f"{saga}/edit",
            data={
                "form_token": form_token(page, f"{saga}/edit"),
                "markdown": "# Edited\r\n\r\nNew text.\r\n",
            },
            headers={"origin": site.url},
        )
        assert edited.status_code == 303, edited.text
        assert edited.headers["location"].endswith("?done=edited")
    shown = site.as_user("admin").json("show", site.saga_id, "--version", "2")
    assert (shown["author"], shown["markdown"]) == ("sam", "# Edited\n\nNew text.\n")
    with site.client() as otto:
        sign_in(site, otto, "otto")
        page = otto.get(saga).text
        cancelled = otto.post(
            f"{saga}/cancel",
            data={"form_token": form_token(page, f"{saga}/cancel")},
            headers={"origin": site.url},
        )
        assert cancelled.status_code == 303, cancelled.text
    assert site.state() == "cancelled"

"""People and permissions through the `pressroom` console script (DESIGN.md "People and permissions").

Every call is a subprocess with its own environment: the token a caller holds
is `PRESSROOM_TOKEN`, nothing else. SQLite and PostgreSQL where storage matters.
People and sagas a test needs before the command it is about are made in this
process (`People.seed`, `People.submitted`); `users add` and `submit` through the
console script have tests here and in `tests/e2e/test_cli.py`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.conftest import Cli, base_env
from tests.support import in_process

BRIEF = "the history of the library network"
# An admin grants only roles they hold: the first admin holds those the tests hand out.
ADMIN = ("admin", "author", "reviewer", "operator")
ALIASES = ["Bob", "bob\u200b", "\uff42\uff4f\uff42", "b\u043eb"]  # zero-width space, fullwidth, Cyrillic o


class People:
    """A CLI runner whose caller is chosen per call by the token it holds."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli
        self.tokens: dict[str, str] = {}

    def run(self, *args: str, token: str | None = None) -> Any:
        env = dict(self.cli.env)
        env.pop("PRESSROOM_TOKEN", None)
        if token is not None:
            env["PRESSROOM_TOKEN"] = token
        return Cli(env, self.cli.cwd).run(*args)

    def json(self, *args: str, token: str | None = None) -> dict[str, Any]:
        done = self.run(*args, "--json", token=token)
        assert done.returncode == 0, f"{args}: exit {done.returncode}: {done.stderr}"
        out: dict[str, Any] = json.loads(done.stdout)
        return out

    def add(self, name: str, *roles: str, by: str | None = "admin") -> str:
        args = [a for r in roles for a in ("--role", r)]
        out = self.json("users", "add", name, *args, token=self.tokens.get(by) if by else None)
        assert out["name"] == name and out["token"].startswith("pr_")
        self.tokens[name] = out["token"]
        return str(out["token"])

    def seed(self, others: dict[str, tuple[str, ...]]) -> None:
        """`admin` (every role the tests hand out), then `others` with their roles, added in
        this process; their tokens kept by name."""
        self.tokens.update(in_process.add_people(self.cli.env, self.cli.cwd, others, admin_roles=ADMIN))

    def submitted(
        self, corpus: Path, dest: str, *, token: str | None = None, actor: str | None = None
    ) -> str:
        """A saga submitted in this process by the holder of `token` or by `actor` (open
        mode), waiting for review; its id."""
        env, cwd = self.cli.env, self.cli.cwd
        sid = in_process.submit(
            env, cwd, brief=BRIEF, corpus=corpus, destinations=[dest], token=token, actor=actor
        )
        engine = create_engine(env["PRESSROOM_DATABASE_URL"], poolclass=NullPool)
        try:
            with engine.connect() as conn:
                state = conn.execute(text("SELECT state FROM sagas WHERE id = :id"), {"id": sid}).scalar()
        finally:
            engine.dispose()
        assert state == "ready-for-review", state
        return sid

    def submit(self, corpus: Path, dest: str, token: str | None, *extra: str) -> dict[str, Any]:
        out = self.json(
            "submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", dest, *extra, token=token
        )
        assert out["state"] == "ready-for-review", out
        return out


@pytest.fixture(params=["sqlite", "postgresql"])
def people(request: pytest.FixtureRequest, tmp_path: Path) -> People:
    url = (
        f"sqlite:///{tmp_path / 'db.sqlite'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    return People(Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp_path))


@pytest.fixture
def sqlite_people(tmp_path: Path) -> People:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    return People(Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp_path))


def _core(user: dict[str, Any]) -> dict[str, Any]:
    return {k: user[k] for k in ("name", "roles", "active")}


def one_line_error(done: Any) -> None:
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr


def test_open_mode_says_so_and_the_first_user_must_be_an_admin(people: People) -> None:
    assert people.json("whoami") == {"mode": "open", "user": None}
    refused = people.run("users", "add", "erin", "--role", "reviewer")
    assert refused.returncode == 2 and "admin" in refused.stderr
    one_line_error(refused)
    token = people.add("admin", "admin", by=None)  # no token needed for the first one
    assert people.json("whoami", token=token)["mode"] == "closed"
    assert people.json("whoami", token=token)["user"]["name"] == "admin"
    listed = people.json("users", "list", token=token)
    assert [_core(u) for u in listed["users"]] == [{"name": "admin", "roles": ["admin"], "active": True}]


def test_closed_mode_needs_a_valid_token_and_the_role(people: People, corpus: Path, tmp_path: Path) -> None:
    people.seed({"erin": ("reviewer",), "dana": ("author",)})
    erin, dana = people.tokens["erin"], people.tokens["dana"]
    site = tmp_path / "site"
    for token in (None, "pr_" + "x" * 43, "not-a-token"):
        for args in (
            ("status",),
            ("whoami",),
            ("submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", f"site:{site}"),
        ):
            done = people.run(*args, token=token)
            assert done.returncode == 4, (args, token, done.stderr)
            one_line_error(done)
    # an author may not approve, a reviewer may not submit nor add users: exit 4
    sid = people.submitted(corpus, f"site:{site}", token=dana)
    assert people.run("approve", sid, "--version", "1", token=dana).returncode == 4
    assert (
        people.run(
            "submit", "--brief", BRIEF, "--corpus", str(corpus), "--dest", f"site:{site}", token=erin
        ).returncode
        == 4
    )
    assert people.run("users", "add", "mallory", "--role", "admin", token=erin).returncode == 4
    assert people.run("cancel", sid, token=erin).returncode == 4
    # --as must name the caller: another user's name, or a stranger's, is bad input
    for other in ("dana", "admin", "nobody"):
        done = people.run("approve", sid, "--version", "1", "--as", other, token=erin)
        assert done.returncode == 2 and "not the caller" in done.stderr, done.stderr
        one_line_error(done)
    assert not site.exists()
    # the reviewer's own approval works, with or without --as
    approval = people.json("approve", sid, "--version", "1", "--as", "Erin", token=erin)
    assert approval["approver"] == "erin"
    assert people.json("status", sid, token=dana)["state"] == "succeeded"
    # revoked: every token of that user stops at once
    people.run("users", "revoke", "dana", token=people.tokens["admin"]).check_returncode()
    done = people.run("status", token=dana)
    assert done.returncode == 4 and "revoked" in done.stderr
    listed = people.json("users", "list", token=people.tokens["admin"])["users"]
    assert {"name": "dana", "roles": ["author"], "active": False} in [_core(u) for u in listed]


def test_a_new_token_replaces_the_old_and_roles_can_change(sqlite_people: People) -> None:
    people = sqlite_people
    people.seed({"erin": ("reviewer",)})
    admin, old = people.tokens["admin"], people.tokens["erin"]
    new = people.json("users", "token", "erin", token=admin)
    assert new["name"] == "erin" and new["roles"] == ["reviewer"] and new["token"] != old
    assert people.run("whoami", token=old).returncode == 4
    assert people.json("whoami", token=new["token"])["user"]["roles"] == ["reviewer"]
    # a user may rotate their own token, not someone else's
    assert people.run("users", "token", "admin", token=new["token"]).returncode == 4
    assert people.json("users", "token", "erin", token=new["token"])["name"] == "erin"
    changed = people.json("users", "roles", "erin", "--role", "author", token=admin)
    assert changed["roles"] == ["author"]
    assert (
        people.run("users", "roles", "admin", "--role", "author", token=admin).returncode == 4
    )  # last admin
    assert people.run("users", "revoke", "admin", token=admin).returncode == 4
    assert people.run("users", "token", "nobody", token=admin).returncode == 3


@pytest.mark.parametrize("alias", ALIASES[1:])
def test_a_name_that_looks_like_a_user_is_refused(sqlite_people: People, alias: str) -> None:
    people = sqlite_people
    people.seed({"Bob": ("author",)})
    done = people.run("users", "add", alias, "--role", "reviewer", token=people.tokens["admin"])
    assert done.returncode == 2 and "looks like" in done.stderr, done.stderr
    one_line_error(done)


def test_submitter_and_editor_cannot_approve_under_any_spelling_closed(
    people: People, corpus: Path, tmp_path: Path
) -> None:
    people.seed({"Bob": ("author", "reviewer"), "erin": ("author", "reviewer")})
    bob, erin = people.tokens["Bob"], people.tokens["erin"]
    site = tmp_path / "site"
    sid = people.submitted(corpus, f"site:{site}", token=bob)
    for alias in [None, *ALIASES]:
        args = ["approve", sid, "--version", "1"] + (["--as", alias] if alias else [])
        done = people.run(*args, token=bob)
        # the same person under any spelling is refused (4); the Cyrillic one is not even the caller (2)
        expected = 2 if alias == "b\u043eb" else 4
        assert done.returncode == expected, (alias, done.stderr)
        one_line_error(done)
    # erin edits the version: now erin is an author of the saga and cannot approve it either
    v1 = people.json("show", sid, token=erin)["markdown"]
    edited = tmp_path / "v2.md"
    edited.write_text(v1.replace("\n## ", "\n## Reviewed by the desk: ", 1), encoding="utf-8")
    people.json("edit", sid, "--file", str(edited), token=erin)
    head = people.json("status", sid, token=erin)  # the automated review may revise it once more
    assert head["state"] == "ready-for-review" and head["version"] >= 2
    done = people.run("approve", sid, "--version", str(head["version"]), token=erin)
    assert done.returncode == 4 and "wrote version 2" in done.stderr, done.stderr
    assert not site.exists()


def test_submitter_and_editor_cannot_approve_under_any_spelling_open(
    people: People, corpus: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    sid = people.submitted(corpus, f"site:{site}", actor="Bob")
    for alias in ALIASES:
        done = people.run("approve", sid, "--version", "1", "--as", alias)
        assert done.returncode == 4 and "cannot approve" in done.stderr, (alias, done.stderr)
    v1 = people.json("show", sid)["markdown"]
    edited = tmp_path / "v2.md"
    edited.write_text(v1.replace("\n## ", "\n## Reviewed by the desk: ", 1), encoding="utf-8")
    people.json("edit", sid, "--file", str(edited), "--as", "\uff47\uff49\uff4e\uff41")  # fullwidth gina
    head = str(people.json("status", sid)["version"])
    for alias in ("gina", "Gina\u200d", "g\u0456na"):  # joiner; Cyrillic i
        done = people.run("approve", sid, "--version", head, "--as", alias)
        assert done.returncode == 4, (alias, done.stderr)
    assert not site.exists()
    assert people.json("approve", sid, "--version", head, "--as", "erin")["approver"] == "erin"
    assert people.json("status", sid)["state"] == "succeeded"


def test_open_mode_still_needs_as_where_it_did(sqlite_people: People, corpus: Path, tmp_path: Path) -> None:
    # `submitter`: whom `pressroom submit` names in open mode without --as
    sid = sqlite_people.submitted(corpus, f"site:{tmp_path / 'site'}", actor="submitter")
    done = sqlite_people.run("approve", sid, "--version", "1")
    assert done.returncode == 2 and "--as" in done.stderr
    one_line_error(done)


def test_events_record_the_principal_and_how_it_was_authenticated(
    sqlite_people: People, corpus: Path, tmp_path: Path
) -> None:
    people = sqlite_people
    open_sid = people.submit(corpus, f"site:{tmp_path / 'a'}", None, "--as", "sam")["saga_id"]
    people.seed({"dana": ("author",), "erin": ("reviewer",)})
    dana, erin = people.tokens["dana"], people.tokens["erin"]
    sid = people.submit(corpus, f"site:{tmp_path / 'b'}", dana)["saga_id"]
    people.json("approve", sid, "--version", "1", token=erin)
    with sqlite3.connect(tmp_path / "db.sqlite") as db:
        ids = dict(db.execute("SELECT name, id FROM users").fetchall())
        rows = db.execute(
            "SELECT saga_id, actor, kind, status, principal_id, auth_method FROM events WHERE saga_id IN (?, ?)",
            (open_sid, sid),
        ).fetchall()
    by = {(r[0], r[2], r[3]): (r[1], r[4], r[5]) for r in rows}
    submitted_open = by[(open_sid, "saga", "submitted")]
    assert (
        submitted_open[0] == "sam" and submitted_open[2] == "open" and submitted_open[1].startswith("open:")
    )
    assert by[(sid, "saga", "submitted")] == ("dana", ids["dana"], "token")
    assert by[(sid, "transition", "approved")] == ("erin", ids["erin"], "token")
    # the agents' own work carries no person
    agent = [r for r in rows if r[0] == sid and r[1] == "writer"]
    assert agent and all(r[4] is None and r[5] is None for r in agent)

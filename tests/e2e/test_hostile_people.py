"""People and tokens against a hostile caller, through the `pressroom` console script.

Each test is what an attacker did against the previous code: a look-alike
name with a capital I, an admin minting a token for a role they do not hold,
first-user adds racing each other, `audit verify` without a token, and a
fork that let the original's submitter approve the copy.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PRESSROOM, Cli, base_env
from tests.e2e.test_people_cli import People, one_line_error
from tests.support import in_process

ALL = ("admin", "author", "reviewer", "operator")
# capital i for l (alone, and with a capital A), all capitals, Cyrillic a, Greek capital iota, fullwidth
ALICES = ["aIice", "AIice", "ALICE", "\u0430lice", "a\u0399ice", "\uff41\uff29\uff49\uff43\uff45"]


def _people(url: str, tmp_path: Path) -> People:
    return People(Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp_path))


def _people_added(p: People, others: dict[str, list[str]]) -> dict[str, str]:
    """An admin and `others`, made in this process where people are a test's setup only."""
    p.tokens = in_process.add_people(p.cli.env, p.cli.cwd, others)
    return p.tokens


def _submitted(p: People, corpus: Path, dests: list[str], **who: str) -> str:
    """A saga in ready-for-review, submitted in this process (by `token=` or `actor=`)."""
    brief = "the history of the library network"
    return in_process.submit(p.cli.env, p.cli.cwd, brief=brief, corpus=corpus, destinations=dests, **who)


@pytest.fixture
def lite(tmp_path: Path) -> People:
    return _people(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path)


@pytest.fixture(params=["sqlite", "postgresql"])
def either(request: pytest.FixtureRequest, tmp_path: Path) -> People:
    if request.param == "sqlite":
        return _people(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path)
    return _people(request.getfixturevalue("pg_url"), tmp_path)


# -- 1. look-alike names --------------------------------------------------------------
def test_users_add_refuses_every_spelling_that_looks_like_a_user(lite: People) -> None:
    lite.add("admin", *ALL, by=None)
    lite.add("alice", "reviewer")
    for alias in ALICES:
        done = lite.run("users", "add", alias, "--role", "author", token=lite.tokens["admin"])
        assert done.returncode == 2 and "looks like the existing user 'alice'" in done.stderr, (
            alias,
            done.stderr,
        )
        one_line_error(done)
    # and the other way round: the capital-I spelling first, the plain one refused
    lite.add("BiIl", "author")
    done = lite.run("users", "add", "bill", "--role", "author", token=lite.tokens["admin"])
    assert done.returncode == 2 and "looks like" in done.stderr, done.stderr
    # names that only share letters stay apart
    lite.add("alina", "author")
    lite.add("ilse", "author")


@pytest.mark.parametrize("alias", ALICES)
def test_open_mode_lookalike_cannot_approve_their_own_saga(lite: People, corpus: Path, alias: str) -> None:
    site = lite.cli.cwd / "site"
    sid = _submitted(lite, corpus, [f"site:{site}"], actor="alice")
    done = lite.run("approve", sid, "--version", "1", "--as", alias)
    assert done.returncode == 4 and "submitted the saga" in done.stderr, done.stderr
    one_line_error(done)
    assert not site.exists()
    approved = lite.json("approve", sid, "--version", "1", "--as", "erin")
    assert approved["version"] == 1


# -- 3. tokens: who issued them, and only roles the issuer holds ---------------------------
def test_an_admin_grants_only_roles_they_hold_and_every_token_names_its_issuer(lite: People) -> None:
    lite.add("root", *ALL, by=None)
    lite.add("ada", "admin", "author", by="root")  # an admin who is no reviewer
    rex = lite.add("rex", "reviewer", by="root")
    ada = lite.tokens["ada"]
    done = lite.run("users", "token", "rex", token=ada)
    assert done.returncode == 4 and "not one ada holds" in done.stderr, done.stderr
    one_line_error(done)
    assert lite.json("whoami", token=rex)["user"]["name"] == "rex"  # rex's token was not replaced
    lite.add("dan", "author", by="ada")
    # Adding a person stays an admin's, whatever their roles: the list names who added them.
    assert lite.run("users", "add", "mal", "--role", "reviewer", token=ada).returncode == 0
    fresh = lite.json("users", "token", "rex", token=lite.tokens["root"])
    assert lite.run("whoami", token=rex).returncode == 4 and fresh["token"] != rex
    listed = {u["name"]: u for u in lite.json("users", "list", token=lite.tokens["root"])["users"]}
    assert listed["root"]["added_by"] is None and listed["root"]["token"]["issued_by"] is None
    assert listed["dan"]["added_by"] == "ada" and listed["dan"]["token"]["issued_by"] == "ada"
    assert listed["rex"]["added_by"] == "root" and listed["rex"]["token"]["issued_by"] == "root"
    assert all(u["token"]["issued_at"] for u in listed.values())
    # a user rotating their own token is its issuer
    lite.json("users", "token", "dan", token=lite.tokens["dan"])
    dan = {u["name"]: u for u in lite.json("users", "list", token=lite.tokens["root"])["users"]}["dan"]
    assert dan["token"]["issued_by"] == "dan"


# -- 4. the first user is added once --------------------------------------------------------
def test_concurrent_first_users_make_exactly_one_admin(either: People) -> None:
    env = dict(either.cli.env)
    env.pop("PRESSROOM_TOKEN", None)
    either.run("whoami").check_returncode()  # the schema exists before the race starts
    procs = [
        subprocess.Popen(
            [PRESSROOM, "users", "add", f"admin{i}", "--role", "admin", "--json"],
            env=env,
            cwd=either.cli.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    winners = [json.loads(out) for code, out, _ in results if code == 0]
    assert len(winners) == 1, results
    for code, _, err in results:
        if code != 0:
            # refused inside the users lock, or closed mode already when it started
            assert code == 4 and ("a user exists already" in err or "not authenticated" in err), (code, err)
            assert err.count("\n") == 1 and "Traceback" not in err
    users = either.json("users", "list", token=winners[0]["token"])["users"]
    assert [u["name"] for u in users] == [winners[0]["name"]]


# -- 5. audit verify needs a token in closed mode -----------------------------------------
def test_audit_verify_needs_a_valid_token_in_closed_mode(lite: People, corpus: Path) -> None:
    dana = _people_added(lite, {"dana": ["author"]})["dana"]
    sid = _submitted(lite, corpus, [f"site:{lite.cli.cwd / 'site'}"], token=dana)
    for token in (None, "pr_" + "q" * 43):
        done = lite.run("audit", "verify", sid, token=token)
        assert done.returncode == 4 and "not authenticated" in done.stderr, done.stderr
        one_line_error(done)
    assert lite.json("audit", "verify", sid, token=dana)["ok"] is True  # any user, no role needed


# -- 6. a fork carries the original's parties into separation of duties --------------------
def test_the_original_submitter_cannot_approve_a_fork(lite: People, corpus: Path) -> None:
    tokens = _people_added(lite, {"dana": ["author", "reviewer"], "olga": ["operator"], "erin": ["reviewer"]})
    dana, olga, erin = tokens["dana"], tokens["olga"], tokens["erin"]
    sid = _submitted(lite, corpus, [f"site:{lite.cli.cwd / 'site'}"], token=dana)
    fork = lite.json("fork", sid, "--version", "1", token=olga)["saga_id"]
    again = lite.json("fork", fork, "--version", "1", token=olga)["saga_id"]  # a fork of the fork
    for target in (fork, again):
        done = lite.run("approve", target, "--version", "1", token=dana)
        assert done.returncode == 4 and f"submitted saga {sid}" in done.stderr, done.stderr
        one_line_error(done)
    assert lite.json("approve", again, "--version", "1", token=erin)["version"] == 1
    assert lite.json("status", again, token=erin)["state"] == "succeeded"

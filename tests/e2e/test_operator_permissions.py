"""The operator commands in closed mode: `prune` and `dead-letters` need the
`operator` role (DESIGN.md "People and permissions"), through the console script."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli, base_env
from tests.e2e.test_people_cli import People, one_line_error


@pytest.fixture
def sqlite_people(tmp_path: Path) -> People:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    return People(Cli(base_env(PRESSROOM_DATABASE_URL=url, PRESSROOM_BROKER_URL="inline://"), tmp_path))


def test_prune_and_dead_letters_need_the_operator_role(sqlite_people: People, corpus: Path) -> None:
    p = sqlite_people
    p.add("admin", "admin", "author", "reviewer", "operator", by=None)  # grants only roles it holds
    p.add("dana", "author")
    p.add("olga", "operator")
    p.submit(corpus, f"site:{p.cli.cwd / 'site'}", p.tokens["dana"])

    for args in (["prune", "--older-than", "1d"], ["dead-letters"], ["dead-letters", "requeue", "x"]):
        refused = p.run(*args, token=p.tokens["dana"])
        assert refused.returncode == 4, (args, refused.stderr)
        assert "needs the role operator" in refused.stderr
        one_line_error(refused)
        nobody = p.run(*args)
        assert nobody.returncode == 4, (args, nobody.stderr)
        one_line_error(nobody)

    pruned = p.json("prune", "--older-than", "1d", "--dry-run", token=p.tokens["olga"])
    assert pruned["actor"] == "olga" and pruned["sagas"] == 0  # the saga is not finished: nothing to prune
    assert p.json("dead-letters", token=p.tokens["olga"]) == {"dead_letters": []}
    missing = p.run("dead-letters", "requeue", "no-such-letter", token=p.tokens["olga"])
    assert missing.returncode == 3, missing.stderr
    one_line_error(missing)
    claimed = p.run("prune", "--older-than", "1d", "--as", "dana", token=p.tokens["olga"])
    assert claimed.returncode == 2, claimed.stderr  # --as must name the caller


def test_retry_fork_and_cancel_through_the_console_script(sqlite_people: People, corpus: Path) -> None:
    """Operators retry, fork and cancel; everyone else is refused; each refusal is one line."""
    p = sqlite_people
    p.add("admin", "admin", "author", "reviewer", "operator", by=None)  # grants only roles it holds
    p.add("dana", "author")
    p.add("erin", "reviewer")
    p.add("olga", "operator")
    saga = p.submit(corpus, f"site:{p.cli.cwd / 'site'}", p.tokens["dana"])
    sid = saga["saga_id"]

    for args in (["retry", sid], ["fork", sid, "--version", "1"], ["cancel", sid]):
        refused = p.run(*args, token=p.tokens["dana"])
        assert refused.returncode == 4 and "needs the role operator" in refused.stderr, (args, refused.stderr)
        one_line_error(refused)

    not_failed = p.run("retry", sid, token=p.tokens["olga"])
    assert not_failed.returncode == 4 and "cannot retry a saga that is ready-for-review" in not_failed.stderr
    one_line_error(not_failed)
    missing = p.run("fork", sid, "--version", "7", token=p.tokens["olga"])
    assert missing.returncode == 3, missing.stderr
    one_line_error(missing)
    bad = p.run("fork", sid, "--version", "one", token=p.tokens["olga"])
    assert bad.returncode == 2, bad.stderr

    forked = p.json("fork", sid, "--version", "1", token=p.tokens["olga"])
    assert forked["state"] == "ready-for-review" and forked["saga_id"] != sid
    assert forked["version_digest"] == saga["version_digest"]
    own = p.run("approve", forked["saga_id"], "--version", "1", token=p.tokens["olga"])
    assert own.returncode == 4, own.stderr  # not a reviewer, and the one who forked it

    cancelled = p.json("cancel", sid, token=p.tokens["olga"])
    assert cancelled["state"] == "cancelled" and cancelled["cancel"] == "cancelled"
    again = p.run("cancel", sid, token=p.tokens["olga"])
    assert again.returncode == 4 and "cannot cancel a saga that is cancelled" in again.stderr
    one_line_error(again)

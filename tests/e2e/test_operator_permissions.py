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
    p.add("admin", "admin", by=None)
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

"""`status` lists (every saga, its pages, the waiting list) and the errors of `status` and
`show` answer the same on the quick SQLite path and on the store's full path
(`tests.support.read_paths`): stdout, stderr and the exit code, byte for byte."""

from __future__ import annotations

import json

import pytest

from tests.support.read_paths import Db, same, seeded

# Every check runs the full path's cold start again (seconds each on a busy machine).
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Db:
    return seeded(tmp_path_factory.mktemp("reads"))


def test_pages_and_the_waiting_list_read_the_same(db: Db) -> None:
    assert len(json.loads(same(db, "status", "--json").stdout)["sagas"]) == 8
    same(db, "status")
    after = None
    seen: list[str] = []
    while True:
        page = json.loads(
            same(db, "status", "--limit", "2", "--json", *(["--after", after] if after else [])).stdout
        )
        seen += [s["saga_id"] for s in page["sagas"]]
        after = page["next"]
        if not after:
            break
    assert len(seen) == len(set(seen)) == 8
    waiting = json.loads(same(db, "status", "--waiting", "--json").stdout)
    assert [s["saga_id"] for s in waiting["sagas"]] == [db.ids["waiting"]]
    none = json.loads(same(db, "status", "--waiting", "--json", PRESSROOM_REVIEW_REMINDER="3650d").stdout)
    assert none["sagas"] == []


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["status", "--limit", "0", "--json"], 2),
        (["status", "--after", "not-a-cursor", "--json"], 2),
        (["status", "SAGA", "--limit", "1"], 2),
        (["status", "deadbeefdeadbeef", "--json"], 3),
        (["status", "x" * 65], 2),
        (["show", "SAGA", "--version", "9", "--json"], 3),
        (["show", "nosuchsaga"], 3),
    ],
)
def test_errors_read_the_same(db: Db, args: list[str], code: int) -> None:
    args = [db.ids["waiting"] if a == "SAGA" else a for a in args]
    assert same(db, *args).returncode == code

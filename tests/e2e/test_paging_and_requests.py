"""`status --json` pages and `submit --request-id`, through the CLI and the HTTP API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlmodel import Session
from starlette.testclient import TestClient

from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.entrypoints.http import create_app
from orchestrator.store.db import make_engine
from orchestrator.store.tables import SagaRow
from tests.conftest import Cli


def seed_sagas(db_url: str, count: int) -> list[str]:
    """`count` sagas, newest first in the returned list; two share a creation time."""
    engine = make_engine(db_url)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    ids = []
    with Session(engine) as s:
        for i in range(count):
            moment = base + timedelta(minutes=i // 2 * 2)  # pairs with equal created_at
            row = SagaRow(
                id=f"seed{i:04d}",
                brief="b",
                corpus="/c",
                destinations=["site:/x"],
                state="preparing",
                created_by="dana",
                created_at=moment,
                updated_at=moment,
            )
            s.add(row)
            ids.append(row.id)
        s.commit()
    engine.dispose()
    return sorted(ids, key=lambda sid: (int(sid[4:]) // 2, sid), reverse=True)


def test_cli_pages_cover_every_saga_once(cli: Cli, sqlite_url: str) -> None:
    expected = seed_sagas(sqlite_url, 7)
    seen: list[str] = []
    after: list[str] = []
    pages = 0
    while True:
        page = cli.json("status", "--limit", "3", *after)
        pages += 1
        seen += [s["saga_id"] for s in page["sagas"]]
        assert len(page["sagas"]) <= 3 and page["limit"] == 3
        if not page["has_more"]:
            assert page["next"] is None
            break
        after = ["--after", page["next"]]
    assert seen == expected and pages == 3
    default = cli.json("status")
    assert default["limit"] == 200 and default["has_more"] is False and len(default["sagas"]) == 7


def test_cli_refuses_a_bad_limit_or_cursor_in_one_line(cli: Cli, sqlite_url: str) -> None:
    seed_sagas(sqlite_url, 1)
    for args, words in (
        (["--limit", "0"], "between 1 and 1000"),
        (["--limit", "1001"], "between 1 and 1000"),
        (["--after", "not-a-cursor"], "not a cursor"),
        (["seed0000", "--limit", "2"], "leave out the saga id"),
    ):
        done = cli.run("status", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and words in done.stderr
        assert "Traceback" not in done.stderr


def test_http_pages_and_bad_parameters(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    expected = seed_sagas(url, 5)
    app = build_app(Settings(database_url=url, broker_url="inline://", secret="s"))
    with TestClient(create_app(app)) as client:
        first = client.get("/api/sagas", params={"limit": 2}).json()
        assert first["has_more"] is True and [s["saga_id"] for s in first["sagas"]] == expected[:2]
        rest = client.get("/api/sagas", params={"limit": 10, "after": first["next"]}).json()
        assert rest["has_more"] is False and [s["saga_id"] for s in rest["sagas"]] == expected[2:]
        for params in ({"limit": "x"}, {"limit": "0"}, {"after": "%%%"}):
            bad = client.get("/api/sagas", params=params)
            assert bad.status_code == 400 and bad.json()["kind"] == "InvalidInput", params


def test_cli_request_id_gives_one_saga_and_refuses_other_arguments(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    args = [
        "submit",
        "--brief",
        "history of the library network",
        "--corpus",
        str(corpus),
        "--dest",
        f"site:{tmp_path / 'site'}",
        "--as",
        "dana",
        "--request-id",
        "req-42",
    ]
    first = cli.json(*args)
    again = cli.json(*args)
    assert first["replayed"] is False and again["replayed"] is True
    assert again["saga_id"] == first["saga_id"] and again["request_id"] == "req-42"
    assert [s["saga_id"] for s in cli.json("status")["sagas"]] == [first["saga_id"]]
    other = cli.run(*args, "--dest", f"site:{tmp_path / 'elsewhere'}")
    assert other.returncode == 4 and "different submit" in other.stderr
    blank = cli.run(*args[:-1], " ")
    assert blank.returncode == 2 and "request id" in blank.stderr
    assert len(cli.json("status")["sagas"]) == 1


def test_http_idempotency_key_replays_with_200(tmp_path: Path, corpus: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    app = build_app(Settings(database_url=url, broker_url="inline://", secret="s"))
    body = {
        "brief": "history of the library network",
        "corpus": str(corpus),
        "destinations": [f"site:{tmp_path / 'site'}"],
        "as": "sam",
    }
    with TestClient(create_app(app)) as client:
        made = client.post("/api/sagas", json=body, headers={"Idempotency-Key": "k-1"})
        again = client.post("/api/sagas", json=body, headers={"Idempotency-Key": "k-1"})
        assert made.status_code == 201 and again.status_code == 200
        assert made.json()["saga_id"] == again.json()["saga_id"]
        conflict = client.post(
            "/api/sagas", json={**body, "brief": "another brief"}, headers={"Idempotency-Key": "k-1"}
        )
        assert conflict.status_code == 409 and conflict.json()["kind"] == "IdempotencyConflict"
        assert len(client.get("/api/sagas").json()["sagas"]) == 1

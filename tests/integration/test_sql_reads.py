"""`status` and `show` on the full path (`Reads`: the read port over a SQLAlchemy session,
`orchestrator.reads.sql_reads`) answer what the CLI's quick path (the same port over the standard
library's sqlite3 or psycopg alone) answers: the same dicts on SQLite and on PostgreSQL.
Where the quick path is not sure (a lookup that finds nothing) it gives up (`Unanswered`),
never an answer of its own; the full path words the error.

The sagas are made in-process, in several states: fresh (no version yet, with role runs
and model calls seeded), ready for review, edited by a person (a second version), approved,
published, cancelled, and one on a pipeline of its own. `SqlSagaReads` also gives the same
records as the quick adapter of the same database (`SqliteReads`, `PgReads`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from orchestrator import people
from orchestrator.core.errors import PressroomError
from orchestrator.pressroom import Pressroom
from orchestrator.reads import read_model
from orchestrator.reads.pg_reads import PgReads
from orchestrator.reads.sql_reads import SqlSagaReads
from orchestrator.reads.sqlite_reads import SqliteReads
from orchestrator.store.tables import SagaRow, utcnow
from tests.conftest import SAMPLE_CORPUS
from tests.integration.helpers import make_app
from tests.support.pipelines import SEEDED_USAGE, seed_progress, write_pipelines

Answer = dict[str, Any] | tuple[str, str, dict[str, Any]]


@dataclass
class World:
    app: Pressroom
    ids: dict[str, str] = field(default_factory=dict)


def _answer(ask: Callable[[], dict[str, Any]]) -> Answer:
    """The dict `ask` returns, or the error it raises: its class, its words, its attributes."""
    try:
        return ask()
    except (PressroomError, read_model.Unanswered) as exc:
        return (type(exc).__name__, str(exc), dict(vars(exc)))


def _same_or_unsure(quick: Answer, full: Answer) -> bool:
    """The quick path answered as the full path did, or gave up."""
    return quick == full or (isinstance(quick, tuple) and quick[0] == "Unanswered")


def _status(app: Pressroom, saga_id: str | None = None, **flags: Any) -> tuple[Answer, Answer]:
    """(the full path's answer, the quick path's answer) to the same `status`."""
    args: dict[str, Any] = {"limit": None, "after": None, "waiting": False, **flags}
    full = _answer(lambda: app.reads.status(saga_id, **args))

    def quick() -> dict[str, Any]:
        reads = _quick(app)
        assert reads is not None
        with reads:
            reminder, now = app.settings.review_reminder, utcnow()
            return read_model.status(reads, saga_id, **args, reminder=reminder, now=now)

    return full, _answer(quick)


def _show(app: Pressroom, saga_id: str, number: int | None = None) -> tuple[Answer, Answer]:
    full = _answer(lambda: app.reads.show(saga_id, number))

    def quick() -> dict[str, Any]:
        reads = _quick(app)
        assert reads is not None
        with reads:
            return read_model.show(reads, saga_id, number)

    return full, _answer(quick)


def _submit(app: Pressroom, name: str, pipeline: str | None = None) -> str:
    out = app.submissions.submit(
        brief=f"the library network ({name})",
        corpus=str(SAMPLE_CORPUS),
        destinations=[f"memory:{name}-a", f"memory:{name}-b"],
        actor="dana",
        pipeline=pipeline,
    )
    return str(out["saga_id"])


def _seed_progress(app: Pressroom, saga_id: str) -> None:
    """Role runs and model calls written straight into the tables (`seed_progress`)."""
    raw = app.engine.raw_connection()
    try:
        mark = "%s" if app.engine.dialect.name == "postgresql" else "?"
        seed_progress(raw.driver_connection, saga_id, mark)
        raw.commit()
    finally:
        raw.close()


@pytest.fixture
def world(either_db_url: str, tmp_path: Path) -> Iterator[World]:
    folder = write_pipelines(tmp_path / "pipelines")
    app = make_app(either_db_url, tmp_path, pipelines_dir=folder)
    held = make_app(either_db_url, tmp_path, pipelines_dir=folder, broker_url="none://")
    made = World(app)
    try:
        made.ids["ready"] = _submit(app, "ready")
        made.ids["edited"] = _submit(app, "edited")
        page = tmp_path / "edited.md"
        page.write_text("# The library network\n\nA person's own page.\n", encoding="utf-8")
        app.reviews.edit(made.ids["edited"], path=str(page), actor="eve")
        made.ids["published"] = _submit(app, "published")
        app.reviews.approve(made.ids["published"], version=1, actor="rita")
        made.ids["cancelled"] = _submit(app, "cancelled")
        app.reviews.cancel(made.ids["cancelled"], actor="olga")
        made.ids["pair"] = _submit(app, "pair", pipeline="pair")
        made.ids["approved"] = _submit(app, "approved")
        # Last, through an app with no broker, so that nothing carries these two further.
        held.reviews.approve(made.ids["approved"], version=1, actor="rita")
        made.ids["fresh"] = _submit(held, "fresh")  # preparing: no version yet
        _seed_progress(app, made.ids["fresh"])
        yield made
    finally:
        held.close()
        app.close()


def test_one_saga_and_its_versions_read_as_the_full_path(world: World) -> None:
    app, ids = world.app, world.ids
    states = {}
    for key, sid in ids.items():
        for ref in (sid, sid[:8]):
            full, quick = _status(app, ref)
            assert quick == full, (key, ref)
        assert isinstance(full, dict)
        states[key] = full["state"]
        for number in (None, 1, 2):
            full, quick = _show(app, sid, number)
            assert _same_or_unsure(quick, full), (key, number)
            assert quick == full or not isinstance(full, dict), (key, number)  # every version read answers
    assert states == {
        "fresh": "preparing",
        "ready": "ready-for-review",
        "edited": "ready-for-review",
        "approved": "approved",
        "published": "succeeded",
        "cancelled": "cancelled",
        "pair": "ready-for-review",
    }
    # What the comparisons above covered, read back from the new path's answers.
    fresh = _status(app, ids["fresh"])[1]
    assert isinstance(fresh, dict) and fresh["usage"] == SEEDED_USAGE and fresh["version"] == 0
    published = _status(app, ids["published"])[1]
    assert isinstance(published, dict) and published["approval"] is not None
    assert all(d["receipt"] for d in published["destinations"])
    edited_v1 = _show(app, ids["edited"], 1)[1]
    assert isinstance(edited_v1, dict) and edited_v1["is_head"] is False
    pair = _status(app, ids["pair"])[1]
    assert isinstance(pair, dict) and pair["pipeline_digest"] is not None
    assert [r["name"] for r in pair["roles"]] == ["research", "draft", "fact-check", "style"]
    assert {r["state"] for r in pair["roles"]} != {"pending"}


def test_pages_cursors_and_the_waiting_list_read_as_the_full_path(world: World, tmp_path: Path) -> None:
    app = world.app
    full, quick = _status(app)
    assert _same_or_unsure(quick, full)
    assert isinstance(full, dict) and len(full["sagas"]) == len(world.ids)
    after = None
    seen: list[str] = []
    while True:
        full, quick = _status(app, limit=3, after=after)
        assert _same_or_unsure(quick, full), after
        assert isinstance(full, dict)
        seen += [s["saga_id"] for s in full["sagas"]]
        after = full["next"]
        if after is None:
            break
    assert sorted(seen) == sorted(world.ids.values())
    full, quick = _status(app, waiting=True)
    assert _same_or_unsure(quick, full)
    assert isinstance(full, dict)
    waiting = {s["saga_id"] for s in full["sagas"]}
    assert waiting == {world.ids[k] for k in ("ready", "edited", "pair")}
    full, quick = _status(app, waiting=True, limit=1)
    assert _same_or_unsure(quick, full) and isinstance(full, dict) and full["has_more"] is True
    # Overdue only after ten years: none of them yet.
    late = make_app(app.settings.database_url, tmp_path, broker_url="none://", review_reminder="3650d")
    try:
        full, quick = _status(late, waiting=True)
        assert _same_or_unsure(quick, full) and isinstance(full, dict) and full["sagas"] == []
    finally:
        late.close()


def test_errors_read_as_the_full_path(world: World) -> None:
    app, ids = world.app, world.ids
    asked = [
        _status(app, limit=0),
        _status(app, limit=1001),
        _status(app, after="not-a-cursor"),
        _status(app, ids["ready"], limit=1),
        _status(app, ids["ready"], waiting=True),
        _status(app, "deadbeefdeadbeef"),
        _status(app, "x" * 65),
        _status(app, ids["ready"][:5]),  # too short for a prefix
        _status(app, ids["ready"][:6] + "%"),  # a prefix is lowercase hex: no LIKE wildcard
        _status(app, "_" * 8),
        _show(app, ids["ready"], 9),
        _show(app, ids["ready"], 0),
        _show(app, ids["ready"], -1),
        _show(app, ids["ready"], 2**31),
        _show(app, ids["fresh"]),  # no version yet
        _show(app, "nosuchsaga"),
        _show(app, "y" * 65),
    ]
    for full, quick in asked:
        assert _same_or_unsure(quick, full), (full, quick)
        assert isinstance(full, tuple), full  # every one is an error
    # The request's own errors are worded once (read_shapes): both paths give them.
    assert sum(quick == full for full, quick in asked) >= 5
    kinds = {full[0] for full, _ in asked if isinstance(full, tuple)}
    assert kinds == {"InvalidInput", "NotFound"}


@pytest.mark.record_edited  # two sagas written without their events
def test_an_ambiguous_prefix_reads_as_the_full_path(either_db_url: str, tmp_path: Path) -> None:
    app = make_app(either_db_url, tmp_path, broker_url="none://")
    try:
        with Session(app.engine) as s:
            for twin in ("abcdef01", "abcdef02"):
                s.add(
                    SagaRow(id=twin + "0" * 24, brief="b", corpus="/c", state="preparing", created_by="dana")
                )
            s.commit()
        for ref in ("abcdef", "abcdef0"):
            full, quick = _status(app, ref)
            assert _same_or_unsure(quick, full) and isinstance(full, tuple) and full[0] == "NotFound"
            assert _show(app, ref)[0] == full
        full, quick = _status(app, "abcdef01")
        assert quick == full and isinstance(full, dict) and full["saga_id"].startswith("abcdef01")
    finally:
        app.close()


def _quick(app: Pressroom) -> SqliteReads | PgReads | None:
    url = app.engine.url
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        return SqliteReads.open_at_head(Path(url.database))
    plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return PgReads.open_at_head(plain)


def _utc(value: Any) -> Any:
    """`value` with every naive datetime taken as UTC (the standard library's sqlite3 gives them
    naive, as stored; SQLAlchemy aware): equal records name the same moments."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, tuple):
        return type(value)(*map(_utc, value))
    if isinstance(value, list):
        return [_utc(v) for v in value]
    return value


def test_the_records_are_the_quick_adapters_records(world: World) -> None:
    app = world.app
    admin = people.add_user(app.people, None, "ada", ["admin", "reviewer"])
    quick = _quick(app)
    assert quick is not None
    with quick, Session(app.engine) as s:
        ported = SqlSagaReads(s)
        assert ported.any_user() is quick.any_user() is True
        for token in (admin.token, "pr_" + "x" * 43, ""):
            assert ported.token_is_valid(token) == quick.token_is_valid(token), token
        assert ported.token_is_valid(admin.token)
        assert _utc(ported.sagas(100, after=None, ready_since=None)) == _utc(
            quick.sagas(100, after=None, ready_since=None)
        )
        for sid in world.ids.values():
            saga = _utc(ported.find_saga(sid))
            assert saga == _utc(quick.find_saga(sid)) == _utc(ported.find_saga(sid[:7]))
            assert ported.steps(sid) == quick.steps(sid)
            assert _utc(ported.latest_approval(sid)) == _utc(quick.latest_approval(sid))
            assert ported.role_runs(sid) == quick.role_runs(sid)
            assert ported.spent(sid) == quick.spent(sid)
            if saga.pipeline_digest:
                assert ported.artifact_body(saga.pipeline_digest) == quick.artifact_body(saga.pipeline_digest)
            if saga.head_version:
                head = _utc(ported.version(sid, saga.head_version))
                assert head == _utc(quick.version(sid, saga.head_version))
                if head.evidence_digest:
                    assert ported.artifact_body(head.evidence_digest) == quick.artifact_body(
                        head.evidence_digest
                    )
        assert ported.spent(world.ids["fresh"]) and ported.role_runs(world.ids["fresh"])
        assert ported.artifact_body("0" * 64) is quick.artifact_body("0" * 64) is None
    with Session(app.engine) as s, pytest.raises(read_model.Unanswered):  # closed mode now
        read_model.may_read(SqlSagaReads(s), None)

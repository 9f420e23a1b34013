"""Line comments on SQLite and PostgreSQL: kept with their version, read-only once it is not the
head, and on a rejection handed to the writer, whose next version drops the cited sentence."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select

from orchestrator.core.errors import InvalidInput, NotFound, StaleVersion
from orchestrator.store.comments import CommentRow
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import EventRow
from tests.conftest import SAMPLE_CORPUS
from tests.integration.helpers import make_app, ready_saga

pytestmark = pytest.mark.integration


def _line_of(markdown: str, marker: str) -> int:
    return next(i for i, text in enumerate(markdown.splitlines(), 1) if marker in text)


def test_comments_are_kept_with_their_version_and_reach_the_writer(
    either_db_url: str, tmp_path: Path
) -> None:
    app = make_app(either_db_url, tmp_path)
    sid = ready_saga(app, SAMPLE_CORPUS, [f"site:{tmp_path / 'site'}"])["saga_id"]
    v1 = app.reads.show(sid)
    assert v1["version"] == 1
    markers = [c["marker"] for c in v1["citations"]]
    assert len(markers) >= 2, markers
    doomed = markers[1]
    line = _line_of(v1["markdown"], doomed)

    first = app.comments.leave(
        sid, version=1, line=line, text=f"{doomed} overstates the source", actor="rita"
    )
    app.comments.leave(sid, version=1, line=1, text="a title <b>comment</b>", actor="ed")
    listed = app.comments.on_version(sid, 1)
    assert [(c["line"], c["author"]) for c in listed] == sorted([(line, "rita"), (1, "ed")])
    assert first["id"] in {c["id"] for c in listed}

    # Bad input is refused, and nothing is kept.
    lines = len(v1["markdown"].splitlines())
    with pytest.raises(InvalidInput, match=f"there is no line {lines + 1}"):
        app.comments.leave(sid, version=1, line=lines + 1, text="x", actor="rita")
    with pytest.raises(InvalidInput, match="at most 2000"):
        app.comments.leave(sid, version=1, line=1, text="y" * 2001, actor="rita")
    with pytest.raises(NotFound):
        app.comments.leave(sid, version=9, line=1, text="x", actor="rita")
    assert len(app.comments.on_version(sid, 1)) == 2

    with Session(app.engine) as s:
        events = s.exec(select(EventRow).where(EventRow.saga_id == sid, EventRow.kind == "comment")).all()
        assert sorted(e.actor for e in events) == ["ed", "rita"]

    app.reviews.reject(sid, actor="rita", reason="see my line comments")
    v2 = app.reads.show(sid)
    assert v2["version"] == 2
    # The sentence citing the commented marker is gone; the other citations stay.
    kept = {c["quote"] for c in v2["citations"]}
    dropped = next(c["quote"] for c in v1["citations"] if c["marker"] == doomed)
    assert dropped not in kept and kept
    assert dropped not in v2["markdown"]

    with Session(app.engine) as s:
        rejected = [
            e
            for e in s.exec(select(EventRow).where(EventRow.saga_id == sid, EventRow.kind == "transition"))
            if (e.detail or {}).get("event") == "rejected"
        ]
        assert len(rejected) == 1
        whole = rejected[0].detail["comments"]  # the whole comments, not the note's summary
        assert {c["text"] for c in whole} == {f"{doomed} overstates the source", "a title <b>comment</b>"}

    # v1 is no longer the head: its comments stay, and take no more.
    with pytest.raises(StaleVersion, match="read-only"):
        app.comments.leave(sid, version=1, line=1, text="late", actor="rita")
    assert len(app.comments.on_version(sid, 1)) == 2
    assert app.comments.on_version(sid, 2) == []
    with Session(app.engine) as s:
        assert len(s.exec(select(CommentRow).where(CommentRow.saga_id == sid)).all()) == 2


def test_the_note_carries_the_comment_lines(either_db_url: str, tmp_path: Path) -> None:
    app = make_app(either_db_url, tmp_path)
    sid = ready_saga(app, SAMPLE_CORPUS, [f"site:{tmp_path / 'site'}"])["saga_id"]
    app.comments.leave(sid, version=1, line=2, text="z" * 2000, actor="rita")
    app.reviews.reject(sid, actor="rita", reason="tighten")
    with Session(app.engine) as s:
        notes = [
            str(row.payload.get("note") or "")
            for row in s.exec(select(OutboxRow).where(OutboxRow.saga_id == sid))
            if row.task == "pressroom.writer.draft"
        ]
    # The message the writer receives: the reason, then the comment's line, cut to fit.
    assert [n for n in notes if n] == [f"rejected by rita: tighten | comments: line 2: {'z' * 159}…;"]

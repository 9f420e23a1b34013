"""The page title is inside the approved digest: a title rewritten in the database after
approval publishes nothing, on SQLite and PostgreSQL, to real files, real git and a real
webhook server; the saga fails naming the title (as with tampered markdown)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlmodel import Session

from tests.integration.helpers import make_app, ready_saga
from tests.integration.test_effect_checks import all_text_under, approve_held, db_url, deliver, git_log
from tests.support.webhook_server import WebhookServer

__all__ = ["db_url"]
FORGED = "Recalled: do not use this product"


def test_a_title_changed_after_approval_reaches_no_destination(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(db_url, tmp_path)
    site, repo = tmp_path / "site", tmp_path / "repo"
    with WebhookServer() as hook:
        saga = ready_saga(app, corpus, [f"site:{site}", f"git:{repo}", f"webhook:{hook.url}"])
        sid = saga["saga_id"]
        approve_held(db_url, tmp_path, saga)
        with Session(app.engine) as s:
            s.execute(text("UPDATE versions SET title = :t WHERE saga_id = :sid"), {"t": FORGED, "sid": sid})
            s.commit()
        deliver(app)
        status = app.reads.status(sid)
        assert hook.received == []
    assert status["state"] == "failed", status
    assert "integrity: the title of version 1" in status["reason"] and "nothing was sent" in status["reason"]
    assert FORGED not in all_text_under(site) and not list(site.glob("*.md"))
    assert not git_log(repo)


def test_the_same_saga_publishes_with_its_title_untouched(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = make_app(db_url, tmp_path)
    site = tmp_path / "site"
    saga = ready_saga(app, corpus, [f"site:{site}"])
    approve_held(db_url, tmp_path, saga)
    deliver(app)
    assert app.reads.status(saga["saga_id"])["state"] == "succeeded"
    assert list(site.glob("*.md"))

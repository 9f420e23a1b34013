"""The `email:` destination against a real local SMTP server (aiosmtpd), through the real saga
path in this process, on SQLite and PostgreSQL: published once and last, never sent twice, a
lost receipt left `uncertain` for a person, and a correction (not an undo) as its compensation."""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlmodel import Session

from evaluation.faults import Crash
from orchestrator.bootstrap import build_app, sweep_leases
from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from orchestrator.pressroom import Pressroom
from orchestrator.store.db import unit_of_work
from orchestrator.store.tables import LedgerRow, WorkRow, utcnow
from sagas import records
from sagas.destinations.base import Destination, PublishedVersion, StatusAnswer
from sagas.destinations.email import KEY_HEADER, EmailDestination, allowed_domains, message_id
from sagas.destinations.registry import open_destination
from sagas.execution_steps import call_tool
from sagas.runner import publisher_caller
from tests.integration.helpers import ready_saga
from tests.support.processes import PRESSROOM
from tests.support.smtp_server import SmtpServer, free_port

SENDER = "press@news.example.org"
TO = "ann@example.org"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


def settings_for(db_url: str, tmp_path: Path, smtp_url: str, **values: Any) -> Settings:
    base: dict[str, Any] = {
        "database_url": db_url,
        "broker_url": "inline://",
        "secret": "integration-secret",
        "destination_timeout": 2.0,
        "secret_file": tmp_path / "secret",
        "smtp_url": smtp_url,
        "smtp_from": SENDER,
        "email_domains": "example.org",
    }
    base.update(values)
    return Settings(**base)


def app_with(settings: Settings, opener: Any = None) -> Pressroom:
    return build_app(settings, open_destination=opener, memory_destinations=True)


def step_of(status: dict[str, Any], uri: str) -> dict[str, Any]:
    return next(d for d in status["destinations"] if d["uri"] == uri)


def test_site_then_email_once_with_its_headers_and_never_twice(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    site = tmp_path / "site"
    with SmtpServer(probe=lambda: sorted(p.name for p in site.glob("*.md"))) as smtp:
        app = app_with(settings_for(db_url, tmp_path, smtp.url))
        # The email is named first: it still goes out only after the site page is published.
        saga = ready_saga(app, corpus, [f"email:{TO}", f"site:{site}"])
        sid = saga["saga_id"]
        app.reviews.approve(sid, version=saga["version"], actor="erin")
        status = app.reads.status(sid)
        assert status["state"] == "succeeded", status
        (got,) = smtp.messages
        assert got.seen and got.seen[0].endswith(".md"), "the site page existed when the email's DATA arrived"
        email_step = step_of(status, f"email:{TO}")
        key = email_step["idempotency_key"]
        msg = got.message
        assert got.recipients == [TO] and got.sender == SENDER
        assert msg["Message-ID"].strip() == message_id(key, SENDER) == email_step["receipt"]["message_id"]
        assert msg[KEY_HEADER].strip() == key
        with Session(app.engine) as s:
            version = records.head(s, records.load_saga(s, sid))
        assert version is not None
        assert msg["Subject"] == " ".join(version.title.split())
        assert msg.get_content().rstrip("\n") == version.markdown.rstrip("\n")
        assert email_step["receipt"]["smtp_reply"].startswith("250")

        # Sent again through the one tool path: the ledger answers from its record.
        with Session(app.engine) as s:
            row = records.load_saga(s, sid)
        again = call_tool(
            app.harness,
            publisher_caller(row, saga["version_digest"]),
            "publish",
            sid,
            f"email:{TO}",
            saga["version_digest"],
        )
        assert again.status.value == "replayed", again
        assert again.output == email_step["receipt"], "the recorded receipt answers"
        assert app.relay is not None
        app.relay.sweep()
        app.consumer.drain()
        assert len(smtp.messages) == 1, "never sent twice"
        app.close()


def test_refused_at_submit_domain_and_header_injection(db_url: str, tmp_path: Path, corpus: Path) -> None:
    app = app_with(settings_for(db_url, tmp_path, "smtp://127.0.0.1:1"))
    for dest, why in (
        ("email:eve@elsewhere.org", "elsewhere.org is not in PRESSROOM_EMAIL_DOMAINS"),
        (f"email:{TO}\r\nBcc: evil@y.org", "control character"),
        (f"email:Ann <{TO}>", "no display name"),
    ):
        with pytest.raises(InvalidInput) as caught:
            app.submissions.submit(
                brief="library network", corpus=str(corpus), destinations=[dest], actor="dana"
            )
        assert why in str(caught.value)
    app.close()
    closed = app_with(settings_for(db_url, tmp_path, "smtp://127.0.0.1:1", email_domains=""))
    with pytest.raises(InvalidInput, match="PRESSROOM_EMAIL_DOMAINS names no recipient domain"):
        closed.submissions.submit(
            brief="library network", corpus=str(corpus), destinations=[f"email:{TO}"], actor="dana"
        )
    closed.close()


def test_the_cli_refuses_header_injection_in_one_line(tmp_path: Path, corpus: Path) -> None:
    env = {
        **os.environ,
        "PRESSROOM_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "PRESSROOM_SECRET": "cli-secret",
        "PRESSROOM_SMTP_URL": "smtp://127.0.0.1:1",
        "PRESSROOM_SMTP_FROM": SENDER,
        "PRESSROOM_EMAIL_DOMAINS": "example.org",
    }
    done = subprocess.run(
        [
            PRESSROOM,
            "submit",
            "--brief",
            "library",
            "--corpus",
            str(corpus),
            "--dest",
            f"email:{TO}\r\nBcc: evil@y.org",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "control character" in done.stderr


def adapter(smtp_url: str, *, domains: str = "example.org", timeout: float = 2.0) -> EmailDestination:
    return EmailDestination(
        (TO,),
        uri=f"email:{TO}",
        timeout=timeout,
        smtp_url=smtp_url,
        sender=SENDER,
        domains=allowed_domains(domains),
    )


VERSION = PublishedVersion(
    saga_id="s1",
    version=1,
    version_digest="d" * 64,
    title="A title",
    slug="a-title",
    markdown="# A\n\nbody\n",
)


def test_the_effect_checks_the_domains_again_and_sends_nothing() -> None:
    with SmtpServer() as smtp:
        with pytest.raises(NotApplied, match="example.org is not in PRESSROOM_EMAIL_DOMAINS"):
            adapter(smtp.url, domains="other.org").publish("k-1", VERSION)
        assert smtp.messages == []


def test_outcomes_before_and_after_data() -> None:
    with pytest.raises(NotApplied, match="before DATA"):
        adapter(f"smtp://127.0.0.1:{free_port()}").publish("k-1", VERSION)  # nobody listens
    with SmtpServer(reply="554 no thanks") as refusing:
        with pytest.raises(NotApplied, match="554"):
            adapter(refusing.url).publish("k-1", VERSION)
    with SmtpServer(stall_seconds=1.5) as stalling:
        with pytest.raises(MaybeApplied, match="after DATA"):
            adapter(stalling.url, timeout=0.3).publish("k-1", VERSION)
        assert len(stalling.messages) == 1, "the server has the message: it may well be delivered"


def test_a_password_is_never_sent_in_clear() -> None:
    with SmtpServer() as plain:  # offers no STARTTLS
        with_login = plain.url.replace("smtp://", "smtp://press:secret@")
        with pytest.raises(NotApplied, match="never sent in clear"):
            adapter(with_login).publish("k-1", VERSION)
        assert plain.messages == []
        adapter(plain.url).publish("k-2", VERSION)  # no login: a plain connection may send
        assert len(plain.messages) == 1


class CrashAfterSend:
    """The real destination, and a process that dies after the message left, before its receipt."""

    def __init__(self, real: Destination) -> None:
        self.real = real
        self.uri = real.uri

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        self.real.publish(key, version)
        raise Crash("the publisher died after the send, before the receipt was recorded")

    def status(self, key: str) -> StatusAnswer:
        return self.real.status(key)

    def compensate(self, key: str, receipt: dict[str, Any]) -> dict[str, Any] | None:
        return self.real.compensate(key, receipt)


def test_a_crash_between_send_and_receipt_is_uncertain_and_cancel_sends_a_correction(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    site = tmp_path / "site"
    email_uri = f"email:{TO}"
    with SmtpServer() as smtp:
        settings = settings_for(db_url, tmp_path, smtp.url)

        def crashing(uri: str) -> Destination:
            real = open_destination(uri, timeout=settings.destination_timeout, settings=settings)
            return CrashAfterSend(real) if uri.startswith("email:") else real

        first = app_with(settings, crashing)
        saga = ready_saga(first, corpus, [f"site:{site}", email_uri])
        sid = saga["saga_id"]
        with pytest.raises(Crash):
            first.reviews.approve(sid, version=saga["version"], actor="erin")
        first.close()
        assert len(smtp.messages) == 1

        # A restarted process: the dead one's lease and its claim on the intent run out, and
        # the work is sent again.
        second = app_with(settings)
        past = utcnow() - timedelta(seconds=1)
        with unit_of_work(second.engine) as uow:
            uow.session.execute(
                update(WorkRow).where(WorkRow.saga_id == sid).values(lease_until=past, holder="dead-worker")
            )
            uow.session.execute(update(LedgerRow).where(LedgerRow.saga_id == sid).values(claimed_until=past))
        assert sweep_leases(second) >= 1
        second.consumer.drain()
        status = second.reads.status(sid)
        assert status["state"] == "effect-unknown", status
        assert step_of(status, email_uri)["state"] == "uncertain"
        assert step_of(status, f"site:{site}")["state"] == "done"
        assert len(smtp.messages) == 1, "delivered exactly once: SMTP cannot be asked, so nothing resends"

        # A person cancels: the site page is undone, the email gets a correction, not an undo.
        key = step_of(status, email_uri)["idempotency_key"]
        cancelled = second.reviews.cancel(sid, actor="olga")
        assert cancelled["state"] == "cancelled", cancelled
        original, correction = (r.message for r in smtp.messages)
        assert correction["Subject"] == f"Correction: {original['Subject']}"
        first_id = original["Message-ID"].strip()
        assert correction["In-Reply-To"].strip() == first_id == correction["References"].strip()
        assert correction["Message-ID"].strip() == message_id("undo-" + key, SENDER) != first_id
        assert "withdrawn" in correction.get_content()
        ledger = second.store.ledger_get("undo-" + key)
        assert ledger is not None and ledger.result is not None
        assert ledger.result["receipt"]["kind"] == "correction"
        assert not list(site.glob("*.md")), "the reversible step was undone"
        second.close()

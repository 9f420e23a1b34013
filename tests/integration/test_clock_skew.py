"""Clocks that disagree: one worker's clock runs ten minutes behind and another's ten minutes
ahead (libfaketime), and every time-based decision still holds, judged on the database's clock.

The processes are the shipped ones, on PostgreSQL and a redis-server of the test's own:
`pressroom relay` and two `pressroom worker`s started with `LD_PRELOAD=libfaketime.so.1`,
one with `FAKETIME=-10m` serving the researcher, writer and reviewer queues (it queues and
claims most of the work, and marks a saga ready for review), one with `FAKETIME=+10m`
serving the publisher (it judges approvals and holds the publish lease). Each worker's
own log shows its shift. Three sagas are approved for five minutes, one by a `pressroom
approve` on the host's clock and one under each skew; `status --waiting` is asked under
each skew.

Every saga ends `succeeded`; every work row was claimed once, sent once and dated on the
database's clock (no lease was judged expired while its holder lived); each destination
was published once; each approval expires five minutes after it was given on the
database's clock; a saga's `ready_at` is the database's time when it became ready, and
`status --waiting` lists it once it has waited the reminder's seconds, not before.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from orchestrator.core.clock import DATABASE_TIME, SYSTEM_CLOCK
from orchestrator.store.db_clock import database_clock, forget_database_clocks
from orchestrator.store.tables import utcnow
from tests.conftest import _unavailable, base_env, free_port
from tests.integration.helpers import make_app
from tests.support.processes import PRESSROOM, Proc, Processes, redis_server, saga_state, wait_until

FAKETIME_LIB = "faketime/libfaketime.so.1"  # under /usr/lib/<multiarch triplet>/ (Debian's libfaketime)
SKEW = timedelta(minutes=10)
LEASE_SECONDS = 20
REMINDER_SECONDS = 10.0
APPROVAL_TTL = timedelta(minutes=5)
SLACK = timedelta(seconds=1)
# Celery's log line: "[2026-01-01 12:00:00,123: INFO/MainProcess] ..." in the process's local time.
LOG_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+: ", re.MULTILINE)


@pytest.fixture
def faketime() -> Path:
    found = next(Path("/usr/lib").glob(f"*/{FAKETIME_LIB}"), None)
    if found is None:
        _unavailable("libfaketime", f"no /usr/lib/*/{FAKETIME_LIB} (Debian package libfaketime)")
    assert found is not None
    return found


@pytest.fixture
def db(pg_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        yield engine
    finally:
        engine.dispose()


def _db_now(db: Engine) -> datetime:
    with db.connect() as conn:
        found: datetime = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    return found.astimezone(UTC)


def _rows(db: Engine, sql: str, **params: Any) -> list[Any]:
    with db.connect() as conn:
        return list(conn.execute(text(sql), params).all())


def _skewed(env: dict[str, str], lib: Path, sign: str) -> dict[str, str]:
    return {**env, "LD_PRELOAD": str(lib), "FAKETIME": f"{sign}{SKEW.seconds // 60}m"}


def _together(*calls: tuple[dict[str, str], list[str]]) -> list[dict[str, Any]]:
    """`pressroom ARGS --json` under each env, all at once; their outputs, in order."""
    running = [
        subprocess.Popen(
            [PRESSROOM, *args, "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for env, args in calls
    ]
    outputs = []
    for (_, args), proc in zip(calls, running, strict=True):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"pressroom {' '.join(args)}: exit {proc.returncode}: {err.decode()}"
        outputs.append(json.loads(out))
    return outputs


def _worker(procs: Processes, name: str, queues: str, env: dict[str, str]) -> Proc:
    pool = [] if queues == "publisher" else ["--pool", "solo"]  # the publisher's shipped threads pool
    return procs.start(name, PRESSROOM, "worker", "--queues", queues, *pool, "--loglevel", "INFO", env=env)


def _submit_args(corpus: Path, site: Path) -> list[str]:
    return ["submit", "--brief", "the library network", "--corpus", str(corpus), "--dest", f"site:{site}"]


def _shift_in_log(worker: Proc) -> timedelta:
    """How far the worker's own clock (its first log line's stamp) is from this process's."""
    found = LOG_STAMP.search(worker.output())
    assert found, f"no timestamped line in {worker.name}'s log:\n{worker.output()[-2000:]}"
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S") - datetime.now()


def _wait_ready(db: Engine, env: dict[str, str], saga_id: str, submitted: datetime) -> datetime:
    """Wait for the saga to be ready for review; its `ready_at`, checked to lie between the
    database's time when it was last seen not ready (or `submitted`) and when it was seen
    ready (with a second's slack for the transaction that made it ready)."""
    seen: list[datetime] = []

    def ready() -> bool:
        seen.append(_db_now(db))
        return saga_state(env, saga_id) == "ready-for-review"

    wait_until(ready, timeout=60, what=f"{saga_id} to be ready for review")
    ((ready_at,),) = _rows(db, "SELECT ready_at FROM sagas WHERE id = :s", s=saga_id)
    ready_at = ready_at.astimezone(UTC)
    low, high = (seen[-2] if len(seen) > 1 else submitted) - SLACK, _db_now(db)
    assert low <= ready_at <= high, (
        f"ready_at {ready_at} is {(ready_at - high).total_seconds():+.0f} s from the database's "
        f"time when the saga became ready ({low}..{high})"
    )
    return ready_at


def _waiting(db: Engine, saga_id: str, envs: list[dict[str, str]]) -> tuple[list[bool], datetime]:
    """Whether `status --waiting`, asked under each of `envs` at once, lists the saga; and the
    database's time once they all answered."""
    answers = _together(*[(env, ["status", "--waiting"]) for env in envs])
    return [saga_id in {s["saga_id"] for s in answer["sagas"]} for answer in answers], _db_now(db)


def _approve_for_five_minutes(db: Engine, saga_envs: dict[str, dict[str, str]]) -> None:
    """Approve each saga under its env; each approval expires five minutes after it was
    given on the database's clock, whatever the approving process's clock says."""
    before = _db_now(db)
    _together(
        *[
            (env, ["approve", sid, "--version", "1", "--as", "erin", "--expires-in", "5m"])
            for sid, env in saga_envs.items()
        ]
    )
    after = _db_now(db)
    for sid in saga_envs:
        ((expires,),) = _rows(db, "SELECT expires_at FROM approvals WHERE saga_id = :s", s=sid)
        expires = expires.astimezone(UTC)
        assert before + APPROVAL_TTL - SLACK <= expires <= after + APPROVAL_TTL + SLACK, (
            f"the approval expires at {expires}, not five minutes after it was given ({before}..{after})"
        )


def _leases_and_effects_hold(db: Engine, saga_ids: list[str]) -> None:
    work = _rows(
        db,
        "SELECT task, attempts, holder, created_at, lease_until, done_at FROM work WHERE saga_id = ANY(:s)",
        s=saga_ids,
    )
    assert len(work) == 4 * len(saga_ids), work  # research, draft, review, publish
    lease = timedelta(seconds=LEASE_SECONDS)
    for task, attempts, holder, created, until, done in work:
        assert done is not None and holder not in ("exhausted", "abandoned"), (task, holder, done)
        assert attempts == 1, f"{task} was claimed {attempts} times: a lease was judged expired early"
        # Dated on the database's clock: a lease ends a lease after its last claim or renewal,
        # which came after the work was queued and before it was done.
        assert created + lease - SLACK <= until <= done + lease + SLACK, (
            f"{task}: queued {created}, lease until {until}, done {done}"
        )
    sent = _rows(db, "SELECT count(*) FROM outbox WHERE saga_id = ANY(:s)", s=saga_ids)[0][0]
    # (A copy of one message may arrive twice, at least once being the broker's promise: the
    # inbox and the held lease turn it away. A resend is a second message for the same work.)
    assert sent == len(work), f"{sent} messages for {len(work)} pieces of work: some were sent again"
    published = _rows(
        db, "SELECT status, attempts FROM ledger WHERE saga_id = ANY(:s) AND tool = 'publish'", s=saga_ids
    )
    assert published == [("done", 1)] * len(saga_ids), published


# Every moment the processes write (not the deadlines: leases, claims, expiry).
WRITTEN = {
    "sagas": ("created_at", "updated_at", "ready_at"),
    "versions": ("created_at",),
    "artifacts": ("created_at",),
    "role_runs": ("updated_at",),
    "events": ("created_at", "proposed_at", "authorized_at", "sent_at", "acked_at"),
    "checkpoints": ("created_at",),
    "approvals": ("issued_at", "consumed_at"),
    "ledger": ("created_at", "updated_at"),
    "steps": ("updated_at",),
    "work": ("created_at", "done_at"),
    "outbox": ("created_at", "sent_at"),
    "inbox": ("processed_at",),
    "saga_budgets": ("updated_at",),
}


def _every_moment_within(db: Engine, start: datetime, end: datetime) -> None:
    """Every moment written lies between `start` and `end`, the database's time when the test
    began and when its sagas had ended: none was read off a skewed host's wall clock."""
    for table, columns in WRITTEN.items():
        for column in columns:
            ((low, high),) = _rows(db, f"SELECT min({column}), max({column}) FROM {table}")
            if low is not None:
                assert start - SLACK <= low and high <= end + SLACK, (
                    f"{table}.{column} from {low} to {high}, outside {start}..{end}"
                )


def test_the_apps_clock_is_the_database_servers(pg_url: str, db: Engine, tmp_path: Path) -> None:
    app = make_app(pg_url, tmp_path)
    assert app.clock is database_clock(app.engine) is DATABASE_TIME.clock
    assert app.indexes.clock is app.clock  # a refresh is compared with a saga's submit time
    for read in (app.clock.now, utcnow):
        before, at, after = _db_now(db), read(), _db_now(db)
        assert before - SLACK / 10 <= at <= after + SLACK / 10
    assert database_clock(make_app(f"sqlite:///{tmp_path / 'one-host.db'}", tmp_path).engine) is SYSTEM_CLOCK
    assert DATABASE_TIME.clock is SYSTEM_CLOCK  # the last application built is on SQLite


def test_a_database_clock_that_cannot_be_read_goes_on_from_the_system_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nowhere = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/none", poolclass=NullPool)
    try:
        before, at, after = datetime.now(UTC), database_clock(nowhere).now(), datetime.now(UTC)
        assert before <= at <= after
        assert "could not read the database's clock" in caplog.text
    finally:
        forget_database_clocks()


def test_workers_ten_minutes_off_change_no_time_based_decision(
    faketime: Path, pg_url: str, db: Engine, tmp_path: Path, corpus: Path
) -> None:
    port = free_port()
    env = base_env(
        PRESSROOM_DATABASE_URL=pg_url,
        PRESSROOM_BROKER_URL=f"redis://127.0.0.1:{port}/0",
        PRESSROOM_LEASE_SECONDS=str(LEASE_SECONDS),
        PRESSROOM_RELAY_POLL="0.2",
        PRESSROOM_RELAY_GRACE="0.5",
        PRESSROOM_REVIEW_REMINDER=f"{REMINDER_SECONDS:g}s",
    )
    behind, ahead = _skewed(env, faketime, "-"), _skewed(env, faketime, "+")
    procs = Processes(env, tmp_path)
    with redis_server(port, tmp_path):
        try:
            start = _db_now(db)
            procs.relay()
            roles = _worker(procs, "roles-behind", "researcher,writer,reviewer", behind)
            publisher = _worker(procs, "publisher-ahead", "publisher", ahead)
            submits = [(env, _submit_args(corpus, tmp_path / f"site{n}")) for n in range(3)]
            sagas = [out["saga_id"] for out in _together(*submits)]
            ready_at = [_wait_ready(db, env, sid, start) for sid in sagas]
            for worker, skew in ((roles, -SKEW), (publisher, SKEW)):
                shift = _shift_in_log(worker)
                assert abs(shift - skew) < timedelta(minutes=1), f"{worker.name}'s clock is {shift} off"

            # The reminder: asked under both skews of the saga that became ready last, before and
            # after it is due; the other two are approved meanwhile, on the host's clock and behind.
            (ready, first), *rest = sorted(zip(ready_at, sagas, strict=True), reverse=True)
            due = ready + timedelta(seconds=REMINDER_SECONDS)
            shown, asked = _waiting(db, first, [behind, ahead])
            assert asked < due, (
                f"asked until {asked}, past the reminder at {due}: start sooner or wait longer"
            )
            assert shown == [False, False], f"listed as waiting {asked - ready} after it became ready"
            _approve_for_five_minutes(db, {rest[0][1]: env, rest[1][1]: behind})
            wait_until(lambda: _db_now(db) >= due, timeout=REMINDER_SECONDS, what="the reminder to be due")
            shown, _ = _waiting(db, first, [behind, ahead])
            assert shown == [True, True], (
                f"not listed as waiting {REMINDER_SECONDS:g} s after it became ready"
            )
            _approve_for_five_minutes(db, {first: ahead})
            for sid in sagas:
                wait_until(
                    lambda s=sid: saga_state(env, s) == "succeeded", timeout=60, what=f"{sid} to succeed"
                )
            _leases_and_effects_hold(db, sagas)
            _every_moment_within(db, start, _db_now(db))
        except AssertionError:
            print(procs.logs())
            raise
        finally:
            procs.stop_all()

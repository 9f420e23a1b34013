"""The quick reads of `status` and `show` on the read port, with records in memory (no I/O).

Whatever they are not sure of is `Unanswered` (the CLI then asks the full path);
what they answer has the shapes of `orchestrator.reads.read_shapes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import pytest

from orchestrator.core.errors import InvalidInput, NotFound
from orchestrator.reads import read_model
from orchestrator.reads.pipeline_shapes import Spent
from orchestrator.reads.read_model import Unanswered
from orchestrator.reads.read_shapes import decode_cursor

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Saga(NamedTuple):
    id: str
    brief: str = "b"
    state: str = "ready-for-review"
    head_version: int = 1
    destinations: list[str] = ["site:/x"]
    review_rounds: int = 0
    created_by: str = "sam"
    reason: str | None = None
    cancel_requested_by: str | None = None
    ready_at: datetime | None = T0
    pipeline: str = "default"
    pipeline_digest: str | None = None
    created_at: datetime = T0
    updated_at: datetime = T0


class Version(NamedTuple):
    number: int
    digest: str = "d" * 64
    title: str = "T"
    author: str = "writer"
    markdown: str = "# T\n"
    citations: list[dict[str, Any]] = []
    evidence_digest: str | None = None
    review: dict[str, Any] | None = None
    created_at: datetime = T0


class Run(NamedTuple):
    role: str
    round: int
    state: str
    verdict: str | None = None
    reason: str | None = None


class MemoryReads:
    """The read port over lists, for these tests."""

    def __init__(
        self,
        sagas: list[Saga],
        users: dict[str, bool] | None = None,
        *,
        runs: Sequence[Run] = (),
        spent: Sequence[Spent] = (),
        artifacts: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.rows = sagas
        self.users = users or {}
        self.runs = list(runs)
        self.spending = list(spent)
        self.artifacts = artifacts or {}

    def any_user(self) -> bool:
        return bool(self.users)

    def token_is_valid(self, token: str) -> bool:
        return self.users.get(token, False)

    def find_saga(self, ref: str) -> Saga | None:
        found = [s for s in self.rows if s.id == ref] or [s for s in self.rows if s.id.startswith(ref)]
        return found[0] if len(found) == 1 else None

    def sagas(
        self, limit: int, *, after: tuple[datetime, str] | None, ready_since: datetime | None
    ) -> list[Saga]:
        rows = sorted(self.rows, key=lambda s: (s.created_at, s.id), reverse=True)
        if after:
            rows = [s for s in rows if (s.created_at, s.id) < after]
        if ready_since:
            rows = [s for s in rows if s.ready_at is not None and s.ready_at <= ready_since]
        return rows[:limit]

    def version(self, saga_id: str, number: int) -> Version | None:
        return Version(number) if number == 1 else None

    def steps(self, saga_id: str) -> Sequence[Any]:
        return []

    def latest_approval(self, saga_id: str) -> Any:
        return None

    def artifact_body(self, digest: str) -> dict[str, Any] | None:
        return self.artifacts.get(digest)

    def role_runs(self, saga_id: str) -> Sequence[Run]:
        return self.runs

    def spent(self, saga_id: str) -> Sequence[Spent]:
        return self.spending


def _status(reads: MemoryReads, saga_id: str | None = None, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"limit": None, "after": None, "waiting": False, "reminder": None, "now": T0, **kw}
    return read_model.status(reads, saga_id, **args)


def test_open_mode_reads_and_closed_mode_needs_a_valid_token() -> None:
    read_model.may_read(MemoryReads([]), None)
    closed = MemoryReads([], users={"pr_good": True, "pr_revoked": False})
    read_model.may_read(closed, " pr_good ")
    for token in (None, "", "pr_revoked", "pr_unknown"):
        with pytest.raises(Unanswered):
            read_model.may_read(closed, token)


def test_pages_follow_the_cursor_and_the_waiting_list() -> None:
    reads = MemoryReads([Saga(f"s{i}", created_at=T0 + timedelta(minutes=i)) for i in range(5)])
    first = _status(reads, limit=2)
    assert [s["saga_id"] for s in first["sagas"]] == ["s4", "s3"] and first["has_more"]
    assert decode_cursor(first["next"])[1] == "s3"
    rest = _status(reads, limit=10, after=first["next"])
    assert [s["saga_id"] for s in rest["sagas"]] == ["s2", "s1", "s0"] and rest["next"] is None
    waiting = _status(reads, waiting=True, now=T0 + timedelta(hours=1), reminder=1800)
    assert len(waiting["sagas"]) == 5 and waiting["sagas"][0]["ready_at"] == "2026-01-01T00:00:00Z"
    with pytest.raises(InvalidInput):  # the shared check: the CLI then lets the full path word it
        _status(reads, limit=0)


def test_a_lookup_the_adapter_could_not_make_is_unanswered() -> None:
    reads = MemoryReads([Saga("abc123"), Saga("fresh0", head_version=0)])
    assert _status(reads, "abc123")["destinations"][0]["idempotency_key"]
    for ask in (
        lambda: _status(reads, "nosuch"),
        lambda: read_model.show(reads, "nosuch", None),
        lambda: read_model.show(reads, "abc123", 2),
    ):
        with pytest.raises(Unanswered):
            ask()
    assert read_model.show(reads, "abc", None)["version"] == 1


def test_the_requests_own_errors_are_worded_here_whatever_the_adapter() -> None:
    reads = MemoryReads([Saga("abc123"), Saga("fresh0", state="preparing", head_version=0)])
    for flags in ({"limit": 1}, {"after": "x"}, {"waiting": True}):
        with pytest.raises(
            InvalidInput, match="^--limit, --after and --waiting list sagas; leave out the saga id$"
        ):
            _status(reads, "abc123", **flags)
    for number in (None, 0):
        with pytest.raises(NotFound, match=r"^saga fresh0 has no version yet \(preparing\)$"):
            read_model.show(reads, "fresh0", number)


DUO = {
    "name": "duo",
    "role": [
        {"name": "research", "kind": "researcher", "planner": "deterministic"},
        {"name": "draft", "kind": "writer", "after": ["research"], "planner": "house"},
        {"name": "fact-check", "kind": "reviewer", "after": ["draft"]},
        {"name": "style", "kind": "reviewer", "after": ["draft"], "planner": "house"},
    ],
}


def test_status_and_show_hold_the_pipeline_its_roles_latest_runs_and_the_usage() -> None:
    saga = Saga("abc123", pipeline="duo", pipeline_digest="p" * 64)
    runs = [
        Run("research", 1, "done"),
        Run("draft", 1, "done"),
        Run("fact-check", 1, "done", "fail"),
        Run("style", 1, "done", "pass"),
        Run("draft", 2, "done"),  # the revision round: the writer and the reviewers run again
        Run("fact-check", 2, "queued"),
        Run("style", 2, "failed", None, "budget exhausted: 41,200 of 40,000 tokens spent by role style"),
    ]
    spent = [Spent("style", 2, 900, 100, 0.25), Spent("draft", 1, 1000, 500, 0.125)]
    reads = MemoryReads([saga], runs=runs, spent=spent, artifacts={"p" * 64: DUO})
    out = _status(reads, "abc123")
    assert (out["pipeline"], out["pipeline_digest"]) == ("duo", "p" * 64)
    roles = {r["name"]: r for r in out["roles"]}
    assert [r["name"] for r in out["roles"]] == ["research", "draft", "fact-check", "style"]  # declared order
    assert [r["kind"] for r in out["roles"]] == ["researcher", "writer", "reviewer", "reviewer"]
    assert (roles["research"]["state"], roles["research"]["round"]) == ("done", 1)
    assert (roles["fact-check"]["state"], roles["fact-check"]["verdict"]) == ("queued", None)  # round 2's
    assert roles["style"]["reason"].startswith("budget exhausted")
    assert roles["draft"]["planner"] == "house" and roles["fact-check"]["planner"] == "deterministic"
    assert roles["style"]["usage"] == {
        "model_calls": 2,
        "tokens_in": 900,
        "tokens_out": 100,
        "cost_usd": 0.25,
    }
    assert roles["research"]["usage"]["model_calls"] == 0
    assert out["usage"] == {"model_calls": 3, "tokens_in": 1900, "tokens_out": 600, "cost_usd": 0.375}
    shown = read_model.show(reads, "abc123", None)
    assert {k: shown[k] for k in ("pipeline", "roles", "usage")} == {
        k: out[k] for k in ("pipeline", "roles", "usage")
    }


def test_a_role_that_never_ran_is_pending_and_a_saga_from_before_pipelines_runs_the_default() -> None:
    out = _status(MemoryReads([Saga("abc123")]), "abc123")
    assert out["pipeline"] == "default" and out["pipeline_digest"] is None
    assert [(r["name"], r["state"], r["verdict"]) for r in out["roles"]] == [
        ("researcher", "pending", None),
        ("writer", "pending", None),
        ("reviewer", "pending", None),
    ]
    assert out["usage"] == {"model_calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0}

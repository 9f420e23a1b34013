"""Reviewers' and operators' use cases on a saga: approve, reject, edit, cancel, reconcile,
retry and fork (`Reviews`); what the CLI, the HTTP API, the MCP server and the pages ask.

Each mutating use case is one unit of work: the state change, its events and
its outgoing messages commit together (invariant 8). With the in-process
broker, queued work is delivered (`drain`) before the call returns. Reads are
`orchestrator.reads.queries.Reads`; `submit` is `orchestrator.submission.Submissions`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session

from orchestrator import findings
from orchestrator.comment_notes import rejection_note
from orchestrator.core import durations
from orchestrator.core.clock import Clock
from orchestrator.core.config import Settings
from orchestrator.core.errors import (
    InvalidInput,
    PolicyRefused,
    Refused,
    SelfApproval,
    StaleVersion,
)
from orchestrator.core.routing import PUBLISH
from orchestrator.harness.approvals import ApprovalBinding, mint, session_for
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.links import LinkPolicy, describe, foreign_links
from orchestrator.harness.principals import Party, Permission, Principal, acting, self_approval
from orchestrator.people import permitted
from orchestrator.ports import Dispatch, Drain, Transact
from orchestrator.reads import views
from orchestrator.reads.queries import Reads
from orchestrator.store.comments import comments_on
from orchestrator.store.db import UnitOfWork
from orchestrator.store.harness_store import approval_row
from orchestrator.store.people import PeopleStore
from orchestrator.store.tables import SagaRow
from roles import rounds
from sagas import records
from sagas.execution_steps import publisher_grant
from sagas.machine import SagaEvent, SagaState
from sagas.preparation import every_role, reviewers, revision
from sagas.retry import carried_parties
from sagas.runner import SagaRunner
from telemetry import metrics, propagation, spans


def _parties(s: Session, saga: SagaRow) -> list[Party]:
    """The people who may not approve `saga`: its submitter and every person who wrote a version."""
    parties = [Party(saga.created_by_id, saga.created_by, "submitted the saga")]
    # An agent's name counts too: nobody approves as the writer of a draft.
    parties += [
        Party(v.author_id, v.author, f"wrote version {v.number}") for v in records.versions(s, saga.id)
    ]
    return parties + carried_parties(s, saga.id)  # a fork: the original's submitter and authors


def parse_duration(text: str) -> timedelta:
    """`90`, `90s`, `30m`, `2h`, `1d` → a positive timedelta."""
    return durations.parse_duration(text)


def _acknowledged(review: Mapping[str, Any] | None, version: int, ticked: Sequence[str]) -> dict[str, Any]:
    """The approval event's record of the findings read; InvalidInput names any not ticked."""
    found = list((review or {}).get("findings") or [])
    missing = findings.unacknowledged(found, ticked)
    if missing:
        named = "; ".join(f"{f.get('rule')} at {f.get('location') or 'the draft'}" for f in missing[:5])
        raise InvalidInput(
            f"tick each finding of version {version} to show you read it before approving; "
            f"{len(missing)} not ticked: {named}"
        )
    return {"acknowledged_findings": findings.acknowledged(found)} if found else {}


class Reviews:
    """A saga's reviews and operator commands, in units of work from `transact`.

    `settings` gives PRESSROOM_APPROVAL_TTL, PRESSROOM_LINK_HOSTS and
    PRESSROOM_MAX_REVIEW_ROUNDS; `signing_key` signs approvals; `runner` runs
    cancel, reconcile, retry and fork; `clock` dates approvals.
    """

    def __init__(
        self,
        *,
        transact: Transact,
        dispatch: Dispatch,
        drain: Drain,
        reads: Reads,
        people: PeopleStore,
        runner: SagaRunner,
        settings: Settings,
        signing_key: bytes,
        clock: Clock,
    ) -> None:
        self._transact = transact
        self._dispatch = dispatch
        self._drain = drain
        self._reads = reads
        self._people = people
        self._runner = runner
        self._settings = settings
        self._signing_key = signing_key
        self._clock = clock

    def approve(
        self,
        saga_id: str,
        *,
        version: int,
        actor: Principal | str,
        expires_in: str | None = None,
        acknowledged: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Approve the head version. `acknowledged` (the web form's ticks): the ids
        (`findings.finding_id`) of the review findings the reviewer read; when given,
        every finding of that version must be among them, and the approval event
        records them. None (the CLI, the API): no acknowledgement is asked for."""
        who = permitted(self._people, actor, Permission.APPROVE)
        with acting(who):
            return self._approve(
                saga_id, version=version, who=who, expires_in=expires_in, acknowledged=acknowledged
            )

    def _approve(
        self,
        saga_id: str,
        *,
        version: int,
        who: Principal,
        expires_in: str | None,
        acknowledged: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        actor = who.display
        ttl = parse_duration(expires_in) if expires_in else timedelta(seconds=self._settings.approval_ttl)
        with self._transact() as uow:
            s = uow.session
            saga = records.find_saga(s, saga_id, lock=True)
            if saga.state != SagaState.READY_FOR_REVIEW:
                raise Refused(
                    f"saga {saga.id} is {saga.state}; only a saga in ready-for-review can be approved"
                )
            if version != saga.head_version:
                raise StaleVersion(
                    f"version {version} is not the head (v{saga.head_version}) of saga {saga.id}"
                )
            head = records.version(s, saga.id, version)
            why = self_approval(who, _parties(s, saga))
            if why:
                raise SelfApproval(why, saga_id=saga.id, principal_id=who.id)
            detail: dict[str, Any] = {"version": version}
            if acknowledged is not None:
                detail |= _acknowledged(head.review, version, acknowledged)
            now = self._clock.now()
            binding = ApprovalBinding(
                saga_id=saga.id,
                version=version,
                version_digest=head.digest,
                destinations=tuple(saga.destinations),
                session=session_for(saga.id, saga.run),
                approver=actor,
                expires_at=now + ttl,
            )
            row = approval_row(binding, mint(binding, self._signing_key), issued_at=now)
            row.approver_id = who.id
            s.add(row)
            records.transition(
                s, saga, SagaEvent.APPROVED, actor=actor, detail={**detail, "approval_id": row.id}
            )
            self._dispatch(
                uow,
                saga_id=saga.id,
                task=PUBLISH,
                version=version,
                version_digest=head.digest,
                capabilities=tuple(sorted(ROLE_CAPABILITIES["publisher"])),
                grant=publisher_grant(saga.destinations),
            )
            if saga.ready_at is not None:
                waited = (now - saga.ready_at).total_seconds()
                metrics.record_approval_wait(waited)
                spans.approval_wait_span(
                    saga.id,
                    version,
                    spans.to_ns(saga.ready_at),
                    spans.to_ns(now),
                    actor,
                    version_digest=head.digest,
                    context=propagation.extract_context(saga.trace_context) if saga.trace_context else None,
                )
            out = {
                "approval_id": row.id,
                "saga_id": saga.id,
                "version": version,
                "version_digest": head.digest,
                "destinations": list(saga.destinations),
                "approver": actor,
                "expires_at": views.iso(binding.expires_at),
            }
        self._drain()
        # Where the work this approval started stands now (inline://: finished).
        final = self._reads.status(str(out["saga_id"]))
        return {**out, "state": final["state"], "reason": final["reason"]}

    def reject(self, saga_id: str, *, actor: Principal | str, reason: str) -> dict[str, Any]:
        who = permitted(self._people, actor, Permission.REJECT)
        with acting(who):
            return self._reject(saga_id, actor=who.display, reason=reason)

    def _reject(self, saga_id: str, *, actor: str, reason: str) -> dict[str, Any]:
        if not (reason or "").strip():
            raise InvalidInput("--reason is empty")
        with self._transact() as uow:
            saga = records.find_saga(uow.session, saga_id, lock=True)
            # The head version's line comments go to the writer in its note, whole in the event.
            remarks = comments_on(uow.session, saga.id, saga.head_version) if saga.head_version else []
            detail = {"comments": remarks} if remarks else None
            records.transition(
                uow.session, saga, SagaEvent.REJECTED, actor=actor, reason=reason, detail=detail
            )
            records.void_approvals(uow.session, saga.id, reason="rejected")
            saga.review_rounds = 0
            # A revision round: the writers answer the note, and every role after them runs again.
            rounds.start_chosen(
                uow,
                self._dispatch,
                saga,
                revision,
                max_revisions=self._settings.max_review_rounds,
                actor=actor,
                note=rejection_note(actor, reason, remarks),
            )
            sid = saga.id
        self._drain()
        return self._reads.status(sid)

    def edit(self, saga_id: str, *, path: str, actor: Principal | str) -> dict[str, Any]:
        who = permitted(self._people, actor, Permission.EDIT)
        with acting(who):
            return self._edit(saga_id, path=path, who=who)

    def _edit(self, saga_id: str, *, path: str, who: Principal) -> dict[str, Any]:
        actor = who.display
        file = Path(path)
        if not file.is_file():
            raise InvalidInput(f"file not found: {path}")
        try:
            markdown = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{path} is not UTF-8 text") from None
        if not markdown.strip():
            raise InvalidInput(f"{path} is empty")
        if foreign := foreign_links(markdown, LinkPolicy(self._settings.allowed_link_hosts())):
            raise PolicyRefused(f"{path} links outside PRESSROOM_LINK_HOSTS: {describe(foreign)}")
        with self._transact() as uow:
            s = uow.session
            saga = records.find_saga(s, saga_id, lock=True)
            previous = records.head(s, saga)
            if previous is not None and previous.markdown == markdown:
                raise InvalidInput("the file is identical to the head version")
            records.transition(s, saga, SagaEvent.EDITED, actor=actor, reason=f"edited by {actor}")
            kept = [c for c in (previous.citations if previous else []) if c.get("marker", "") in markdown]
            title = views.title_of(markdown, previous.title if previous else "Untitled")
            new = records.add_version(
                s,
                saga,
                title=title,
                markdown=markdown,
                author=actor,
                citations=kept,
                evidence_digest=previous.evidence_digest if previous else None,
            )
            new.author_id = who.id
            s.add(new)
            # The reviewers read the person's text; nobody rewrites it.
            rounds.start_chosen(
                uow,
                self._dispatch,
                saga,
                reviewers,
                max_revisions=self._settings.max_review_rounds,
                actor=actor,
            )
            sid = saga.id
        self._drain()
        return self._reads.status(sid)

    def cancel(self, saga_id: str, *, actor: Principal | str) -> dict[str, Any]:
        """Cancel; while executing, the runner stops before its next step and undoes what it published."""
        from sagas.reconcile import cancel_saga

        who = permitted(self._people, actor, Permission.CANCEL)
        sid = self._reads.saga_id(saga_id)
        with acting(who):
            done = cancel_saga(self._runner, sid, actor=who.display)
        self._drain()
        return {**self._reads.status(sid), "cancel": done}

    def reconcile(
        self, saga_id: str, *, destination: str, outcome: str, actor: Principal | str, reason: str
    ) -> dict[str, Any]:
        from sagas.reconcile import reconcile_step

        who = permitted(self._people, actor, Permission.RECONCILE)
        if outcome not in ("confirmed", "absent"):
            raise InvalidInput("--outcome must be confirmed or absent")
        if not (reason or "").strip():
            raise InvalidInput("--reason is empty")
        sid = self._reads.saga_id(saga_id)
        with acting(who):
            reconcile_step(
                self._runner,
                self._dispatch,
                sid,
                destination=destination,
                outcome=outcome,
                actor=who.display,
                reason=reason,
            )
        self._drain()
        return self._reads.status(sid)

    def retry(self, saga_id: str, *, actor: Principal | str) -> dict[str, Any]:
        """A failed saga runs again from its last good point (same keys); a failed undo runs again."""
        from sagas.retry import retry_saga

        who = permitted(self._people, actor, Permission.RETRY)
        sid = self._reads.saga_id(saga_id)
        with acting(who):
            what = retry_saga(
                self._runner, self._dispatch, sid, actor=who.display, prepare=self._prepare_again()
            )
        self._drain()
        return {**self._reads.status(sid), "retried": what}

    def fork(self, saga_id: str, *, version: int, actor: Principal | str) -> dict[str, Any]:
        """A new saga at ready-for-review with that version's bytes."""
        from sagas.retry import fork_saga

        who = permitted(self._people, actor, Permission.FORK)
        sid = self._reads.saga_id(saga_id)
        with acting(who):
            new = fork_saga(self._runner, sid, version=version, actor=who.display, actor_id=who.id)
        return {**self._reads.status(new), "forked_from": {"saga_id": sid, "version": version}}

    def _prepare_again(self) -> Callable[[UnitOfWork, SagaRow, str], object]:
        """A retried preparation: a round of every role of the saga's pipeline."""

        def prepare(uow: UnitOfWork, saga: SagaRow, actor: str) -> object:
            return rounds.start_chosen(
                uow,
                self._dispatch,
                saga,
                every_role,
                max_revisions=self._settings.max_review_rounds,
                actor=actor,
            )

        return prepare


__all__ = ["Reviews", "parse_duration"]

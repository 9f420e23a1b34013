"""Use cases: what the CLI, the HTTP API and the MCP server ask Pressroom to do.

Each mutating use case is one unit of work: the state change, its events and
its outgoing messages commit together (invariant 8). With the in-process
broker, queued work is delivered before the call returns. The read use cases
live in `orchestrator.reads` and `submit` in `orchestrator.submission`; they
are named here too, so every entry point calls one module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session

from orchestrator import findings, views
from orchestrator.app import App
from orchestrator.comment_notes import rejection_note
from orchestrator.core import durations
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
from orchestrator.reads import diff, history, show, status
from orchestrator.store.comments import comments_on
from orchestrator.store.db import UnitOfWork, unit_of_work
from orchestrator.store.harness_store import approval_row
from orchestrator.store.tables import SagaRow
from orchestrator.submission import MAX_BRIEF, index_corpus, refresh_index, submit
from roles import rounds
from sagas import records
from sagas.machine import SagaEvent, SagaState
from sagas.preparation import every_role, reviewers, revision
from sagas.retry import carried_parties
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


def approve(
    app: App,
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
    who = permitted(app.people, actor, Permission.APPROVE)
    with acting(who):
        return _approve(
            app, saga_id, version=version, who=who, expires_in=expires_in, acknowledged=acknowledged
        )


def _approve(
    app: App,
    saga_id: str,
    *,
    version: int,
    who: Principal,
    expires_in: str | None,
    acknowledged: Sequence[str] | None = None,
) -> dict[str, Any]:
    actor = who.display
    ttl = parse_duration(expires_in) if expires_in else timedelta(seconds=app.settings.approval_ttl)
    with unit_of_work(app.engine) as uow:
        s = uow.session
        saga = records.find_saga(s, saga_id, lock=True)
        if saga.state != SagaState.READY_FOR_REVIEW:
            raise Refused(f"saga {saga.id} is {saga.state}; only a saga in ready-for-review can be approved")
        if version != saga.head_version:
            raise StaleVersion(f"version {version} is not the head (v{saga.head_version}) of saga {saga.id}")
        head = records.version(s, saga.id, version)
        why = self_approval(who, _parties(s, saga))
        if why:
            raise SelfApproval(why, saga_id=saga.id, principal_id=who.id)
        detail: dict[str, Any] = {"version": version}
        if acknowledged is not None:
            detail |= _acknowledged(head.review, version, acknowledged)
        now = app.clock.now()
        binding = ApprovalBinding(
            saga_id=saga.id,
            version=version,
            version_digest=head.digest,
            destinations=tuple(saga.destinations),
            session=session_for(saga.id, saga.run),
            approver=actor,
            expires_at=now + ttl,
        )
        row = approval_row(binding, mint(binding, app.signing_key), issued_at=now)
        row.approver_id = who.id
        s.add(row)
        records.transition(s, saga, SagaEvent.APPROVED, actor=actor, detail={**detail, "approval_id": row.id})
        app.dispatch(
            uow,
            saga_id=saga.id,
            task=PUBLISH,
            version=version,
            version_digest=head.digest,
            capabilities=tuple(sorted(ROLE_CAPABILITIES["publisher"])),
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
    app.drain()
    # Where the work this approval started stands now (inline://: finished).
    final = status(app, str(out["saga_id"]))
    return {**out, "state": final["state"], "reason": final["reason"]}


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


def reject(app: App, saga_id: str, *, actor: Principal | str, reason: str) -> dict[str, Any]:
    who = permitted(app.people, actor, Permission.REJECT)
    with acting(who):
        return _reject(app, saga_id, actor=who.display, reason=reason)


def _reject(app: App, saga_id: str, *, actor: str, reason: str) -> dict[str, Any]:
    if not (reason or "").strip():
        raise InvalidInput("--reason is empty")
    with unit_of_work(app.engine) as uow:
        saga = records.find_saga(uow.session, saga_id, lock=True)
        # The head version's line comments go to the writer in its note, whole in the event.
        remarks = comments_on(uow.session, saga.id, saga.head_version) if saga.head_version else []
        detail = {"comments": remarks} if remarks else None
        records.transition(uow.session, saga, SagaEvent.REJECTED, actor=actor, reason=reason, detail=detail)
        records.void_approvals(uow.session, saga.id, reason="rejected")
        saga.review_rounds = 0
        # A revision round: the writers answer the note, and every role after them runs again.
        rounds.start_chosen(
            uow,
            app.dispatch,
            saga,
            revision,
            max_revisions=app.settings.max_review_rounds,
            actor=actor,
            note=rejection_note(actor, reason, remarks),
        )
        sid = saga.id
    app.drain()
    return status(app, sid)


def edit(app: App, saga_id: str, *, path: str, actor: Principal | str) -> dict[str, Any]:
    who = permitted(app.people, actor, Permission.EDIT)
    with acting(who):
        return _edit(app, saga_id, path=path, who=who)


def _edit(app: App, saga_id: str, *, path: str, who: Principal) -> dict[str, Any]:
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
    if foreign := foreign_links(markdown, LinkPolicy(app.settings.allowed_link_hosts())):
        raise PolicyRefused(f"{path} links outside PRESSROOM_LINK_HOSTS: {describe(foreign)}")
    with unit_of_work(app.engine) as uow:
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
            uow, app.dispatch, saga, reviewers, max_revisions=app.settings.max_review_rounds, actor=actor
        )
        sid = saga.id
    app.drain()
    return status(app, sid)


def cancel(app: App, saga_id: str, *, actor: Principal | str) -> dict[str, Any]:
    """Cancel; while executing, the runner stops before its next step and undoes what it published."""
    from sagas.reconcile import cancel_saga

    who = permitted(app.people, actor, Permission.CANCEL)
    sid = _saga_id(app, saga_id)
    with acting(who):
        done = cancel_saga(app.runner, sid, actor=who.display)
    app.drain()
    return {**status(app, sid), "cancel": done}


def reconcile(
    app: App, saga_id: str, *, destination: str, outcome: str, actor: Principal | str, reason: str
) -> dict[str, Any]:
    from sagas.reconcile import reconcile_step

    who = permitted(app.people, actor, Permission.RECONCILE)
    if outcome not in ("confirmed", "absent"):
        raise InvalidInput("--outcome must be confirmed or absent")
    if not (reason or "").strip():
        raise InvalidInput("--reason is empty")
    sid = _saga_id(app, saga_id)
    with acting(who):
        reconcile_step(
            app.runner,
            app.dispatch,
            sid,
            destination=destination,
            outcome=outcome,
            actor=who.display,
            reason=reason,
        )
    app.drain()
    return status(app, sid)


def retry(app: App, saga_id: str, *, actor: Principal | str) -> dict[str, Any]:
    """A failed saga runs again from its last good point (same keys); a failed undo runs again."""
    from sagas.retry import retry_saga

    who = permitted(app.people, actor, Permission.RETRY)
    sid = _saga_id(app, saga_id)
    with acting(who):
        what = retry_saga(app.runner, app.dispatch, sid, actor=who.display, prepare=_prepare_again(app))
    app.drain()
    return {**status(app, sid), "retried": what}


def fork(app: App, saga_id: str, *, version: int, actor: Principal | str) -> dict[str, Any]:
    """A new saga at ready-for-review with that version's bytes."""
    from sagas.retry import fork_saga

    who = permitted(app.people, actor, Permission.FORK)
    sid = _saga_id(app, saga_id)
    with acting(who):
        new = fork_saga(app.runner, sid, version=version, actor=who.display, actor_id=who.id)
    return {**status(app, new), "forked_from": {"saga_id": sid, "version": version}}


def _prepare_again(app: App) -> Callable[[UnitOfWork, SagaRow, str], object]:
    """A retried preparation: a round of every role of the saga's pipeline."""

    def prepare(uow: UnitOfWork, saga: SagaRow, actor: str) -> object:
        return rounds.start_chosen(
            uow, app.dispatch, saga, every_role, max_revisions=app.settings.max_review_rounds, actor=actor
        )

    return prepare


def _saga_id(app: App, prefix: str) -> str:
    with Session(app.engine) as s:
        return records.find_saga(s, prefix).id


__all__ = [
    "refresh_index",
    "index_corpus",
    "MAX_BRIEF",
    "approve",
    "cancel",
    "diff",
    "edit",
    "fork",
    "retry",
    "history",
    "parse_duration",
    "reconcile",
    "reject",
    "show",
    "status",
    "submit",
]

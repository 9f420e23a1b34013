"""Use cases: what the CLI, the HTTP API and the MCP server ask Pressroom to do.

Each mutating use case is one unit of work: the state change, its events and
its outgoing messages commit together (invariant 8). With the in-process
broker, queued work is delivered before the call returns.
"""

from __future__ import annotations

import difflib
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from orchestrator import paging, views
from orchestrator.app import App, saga_span
from orchestrator.core import durations
from orchestrator.core.errors import (
    InvalidInput,
    NotFound,
    PolicyRefused,
    Refused,
    SelfApproval,
    StaleVersion,
)
from orchestrator.core.routing import DRAFT, PUBLISH, RESEARCH, REVIEW
from orchestrator.harness.approvals import ApprovalBinding, mint, session_for
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.links import LinkPolicy, describe, foreign_links
from orchestrator.harness.principals import Party, Permission, Principal, acting, require, self_approval
from orchestrator.people import as_principal
from orchestrator.store import submit_requests
from orchestrator.store.db import unit_of_work
from orchestrator.store.harness_store import add_event, approval_row
from orchestrator.store.tables import SagaRow, utcnow
from sagas import records
from sagas.destinations.registry import normalise_destination, parse_destination
from sagas.machine import SagaEvent, SagaState
from telemetry import metrics, propagation, spans

MAX_BRIEF = 4000


def _person(app: App, actor: Principal | str, permission: Permission) -> Principal:
    """The caller as a principal holding `permission` (a bare name only in open mode)."""
    return require(as_principal(app.people, actor), permission)


def _parties(s: Session, saga: SagaRow) -> list[Party]:
    """The people who may not approve `saga`: its submitter and every person who wrote a version."""
    parties = [Party(saga.created_by_id, saga.created_by, "submitted the saga")]
    # An agent's name counts too: nobody approves as the writer of a draft.
    parties += [
        Party(v.author_id, v.author, f"wrote version {v.number}") for v in records.versions(s, saga.id)
    ]
    return parties


def _within(roots: list[Path], path: Path, what: str) -> None:
    """With PRESSROOM_ALLOWED_ROOTS set, refuse a path outside every root."""
    if not roots:
        return
    resolved = path.resolve()
    if not any(resolved == r or r in resolved.parents for r in roots):
        raise InvalidInput(f"{what} {path} is outside the allowed roots (PRESSROOM_ALLOWED_ROOTS)")


def parse_duration(text: str) -> timedelta:
    """`90`, `90s`, `30m`, `2h`, `1d` → a positive timedelta."""
    return durations.parse_duration(text)


def submit(
    app: App,
    *,
    brief: str,
    corpus: str,
    destinations: list[str],
    actor: Principal | str,
    request_id: str | None = None,
) -> dict[str, Any]:
    """Start a saga. With `request_id`, a retry returns the saga the first call made
    (`"replayed": true`) instead of making another."""
    who = _person(app, actor, Permission.SUBMIT)
    with acting(who):
        return _submit(
            app, brief=brief, corpus=corpus, destinations=destinations, who=who, request_id=request_id
        )


def _submit(
    app: App, *, brief: str, corpus: str, destinations: list[str], who: Principal, request_id: str | None
) -> dict[str, Any]:
    brief = (brief or "").strip()
    if not brief:
        raise InvalidInput("the brief is empty")
    if len(brief) > MAX_BRIEF:
        raise InvalidInput(f"the brief is longer than {MAX_BRIEF} characters")
    root = Path(corpus).expanduser()
    if root.exists() and not root.is_dir():
        raise InvalidInput(f"--corpus {corpus} is a file, not a folder of .md/.txt sources")
    if not root.is_dir():
        raise InvalidInput(f"corpus folder not found: {corpus}")
    if not destinations:
        raise InvalidInput("at least one --dest is needed")
    roots = app.settings.roots()
    _within(roots, root, "corpus folder")
    destinations = [normalise_destination(u, allow_memory=app.memory_destinations) for u in destinations]
    for uri in destinations:
        scheme, target = parse_destination(uri)
        if scheme in ("site", "git"):
            _within(roots, Path(target).expanduser(), "destination")
    if len(set(destinations)) != len(destinations):
        raise InvalidInput("a destination is named twice")
    digest = ""
    if request_id is not None:
        request_id = submit_requests.check_request_id(request_id)
        digest = submit_requests.args_digest(
            brief=brief, corpus=str(root.resolve()), destinations=list(destinations), actor=who.id
        )
        with Session(app.engine) as s:
            made = submit_requests.find(s, request_id, digest)
        if made is not None:
            return {**status(app, made), "request_id": request_id, "replayed": True}
    try:
        saga_id = _start_saga(app, brief, root, destinations, who, request_id, digest)
    except IntegrityError:
        if request_id is None:
            raise
        with Session(app.engine) as s:  # a twin of this request committed first
            made = submit_requests.find(s, request_id, digest)
        if made is None:
            raise
        return {**status(app, made), "request_id": request_id, "replayed": True}
    app.drain()
    out = status(app, saga_id)
    return {**out, "request_id": request_id, "replayed": False} if request_id else out


def _start_saga(
    app: App,
    brief: str,
    root: Path,
    destinations: list[str],
    who: Principal,
    request_id: str | None,
    digest: str,
) -> str:
    actor = who.display
    submitted = utcnow()
    indexed = refresh_index(app, root)  # research then reads nothing this walk saw unchanged
    with unit_of_work(app.engine) as uow:
        saga = SagaRow(
            brief=brief,
            corpus=str(root.resolve()),
            destinations=list(destinations),
            state=SagaState.PREPARING.value,
            created_by=actor,
            created_by_id=who.id,
            created_at=submitted,
        )
        with saga_span("submit", saga):
            # The saga's trace starts here; every later message and command joins it.
            saga.trace_context = propagation.inject_context()
            uow.session.add(saga)
            uow.session.flush()
            add_event(
                uow.session,
                saga_id=saga.id,
                actor=actor,
                kind="saga",
                status="submitted",
                detail={"destinations": destinations, "corpus": saga.corpus, "index": indexed},
            )
            app.dispatch(
                uow,
                saga_id=saga.id,
                task=RESEARCH,
                capabilities=tuple(sorted(ROLE_CAPABILITIES["researcher"])),
            )
            if request_id is not None:
                submit_requests.record(uow.session, request_id, saga.id, digest)
        return saga.id


def refresh_index(app: App, root: Path) -> dict[str, int]:
    """Bring the corpus index of `root` up to date; counts of files added, changed, removed, unchanged."""
    if app.indexes is None:
        return {}
    done = app.indexes.for_corpus(root).refresh()
    return {
        "added": len(done.added),
        "changed": len(done.changed),
        "removed": len(done.removed),
        "unchanged": done.unchanged,
    }


def index_corpus(app: App, corpus: str) -> dict[str, Any]:
    """`pressroom index`: build or refresh the index of one corpus folder."""
    root = Path(corpus).expanduser()
    if not root.is_dir():
        raise InvalidInput(f"corpus folder not found: {corpus}")
    _within(app.settings.roots(), root, "corpus folder")
    if app.indexes is None:
        raise InvalidInput("this app has no corpus index")
    return app.indexes.for_corpus(root).refresh().summary()


def status(
    app: App,
    saga_id: str | None = None,
    *,
    limit: int | None = None,
    after: str | None = None,
    waiting: bool = False,
) -> dict[str, Any]:
    """One saga, or a page of sagas (`paging.list_sagas`); `waiting`: only those in
    ready-for-review longer than PRESSROOM_REVIEW_REMINDER (all of them when unset)."""
    with Session(app.engine) as s:
        if saga_id is None:
            since = utcnow() - timedelta(seconds=app.settings.review_reminder or 0) if waiting else None
            return paging.list_sagas(s, limit=limit, after=after, waiting_since=since)
        if limit is not None or after or waiting:
            raise InvalidInput("--limit, --after and --waiting list sagas; leave out the saga id")
        return views.saga_status(s, records.find_saga(s, saga_id))


def show(app: App, saga_id: str, version: int | None = None) -> dict[str, Any]:
    with Session(app.engine) as s:
        saga = records.find_saga(s, saga_id)
        number = version if version is not None else saga.head_version
        if number == 0:
            raise NotFound(f"saga {saga.id} has no version yet ({saga.state})")
        return views.version_view(s, saga, records.version(s, saga.id, number))


def diff(app: App, saga_id: str, a: int, b: int) -> str:
    with Session(app.engine) as s:
        saga = records.find_saga(s, saga_id)
        va, vb = records.version(s, saga.id, a), records.version(s, saga.id, b)
        lines = difflib.unified_diff(
            va.markdown.splitlines(keepends=True),
            vb.markdown.splitlines(keepends=True),
            fromfile=f"v{a} {va.digest[:12]}",
            tofile=f"v{b} {vb.digest[:12]}",
        )
        return "".join(lines)


def history(app: App, saga_id: str) -> dict[str, Any]:
    with Session(app.engine) as s:
        saga = records.find_saga(s, saga_id)
        return {"saga_id": saga.id, "events": views.events(s, saga.id)}


def approve(
    app: App, saga_id: str, *, version: int, actor: Principal | str, expires_in: str | None = None
) -> dict[str, Any]:
    who = _person(app, actor, Permission.APPROVE)
    with acting(who):
        return _approve(app, saga_id, version=version, who=who, expires_in=expires_in)


def _approve(
    app: App, saga_id: str, *, version: int, who: Principal, expires_in: str | None
) -> dict[str, Any]:
    actor = who.display
    ttl = parse_duration(expires_in) if expires_in else timedelta(seconds=app.settings.approval_ttl)
    with unit_of_work(app.engine) as uow:
        s = uow.session
        saga = records.find_saga(s, saga_id)
        saga = records.load_saga(s, saga.id, lock=True)
        if saga.state != SagaState.READY_FOR_REVIEW:
            raise Refused(f"saga {saga.id} is {saga.state}; only a saga in ready-for-review can be approved")
        if version != saga.head_version:
            raise StaleVersion(f"version {version} is not the head (v{saga.head_version}) of saga {saga.id}")
        head = records.version(s, saga.id, version)
        why = self_approval(who, _parties(s, saga))
        if why:
            raise SelfApproval(why, saga_id=saga.id, principal_id=who.id)
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
        records.transition(
            s, saga, SagaEvent.APPROVED, actor=actor, detail={"version": version, "approval_id": row.id}
        )
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


def reject(app: App, saga_id: str, *, actor: Principal | str, reason: str) -> dict[str, Any]:
    who = _person(app, actor, Permission.REJECT)
    with acting(who):
        return _reject(app, saga_id, actor=who.display, reason=reason)


def _reject(app: App, saga_id: str, *, actor: str, reason: str) -> dict[str, Any]:
    if not (reason or "").strip():
        raise InvalidInput("--reason is empty")
    with unit_of_work(app.engine) as uow:
        saga = records.load_saga(uow.session, records.find_saga(uow.session, saga_id).id, lock=True)
        records.transition(uow.session, saga, SagaEvent.REJECTED, actor=actor, reason=reason)
        records.void_approvals(uow.session, saga.id, reason="rejected")
        head = records.head(uow.session, saga)
        saga.review_rounds = 0
        app.dispatch(
            uow,
            saga_id=saga.id,
            task=DRAFT,
            version=saga.head_version,
            version_digest=head.digest if head else None,
            note=f"rejected by {actor}: {reason}"[:500],
            capabilities=tuple(sorted(ROLE_CAPABILITIES["writer"])),
        )
        sid = saga.id
    app.drain()
    return status(app, sid)


def edit(app: App, saga_id: str, *, path: str, actor: Principal | str) -> dict[str, Any]:
    who = _person(app, actor, Permission.EDIT)
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
        saga = records.load_saga(s, records.find_saga(s, saga_id).id, lock=True)
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
        app.dispatch(
            uow,
            saga_id=saga.id,
            task=REVIEW,
            version=new.number,
            version_digest=new.digest,
            capabilities=tuple(sorted(ROLE_CAPABILITIES["reviewer"])),
        )
        sid = saga.id
    app.drain()
    return status(app, sid)


def cancel(app: App, saga_id: str, *, actor: Principal | str) -> dict[str, Any]:
    """Cancel; while executing, the runner stops before its next step and undoes what it published."""
    from sagas.reconcile import cancel_saga

    who = _person(app, actor, Permission.CANCEL)
    sid = _saga_id(app, saga_id)
    with acting(who):
        done = cancel_saga(app.runner, sid, actor=who.display)
    app.drain()
    return {**status(app, sid), "cancel": done}


def reconcile(
    app: App, saga_id: str, *, destination: str, outcome: str, actor: Principal | str, reason: str
) -> dict[str, Any]:
    from sagas.reconcile import reconcile_step

    who = _person(app, actor, Permission.RECONCILE)
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

    who = _person(app, actor, Permission.RETRY)
    sid = _saga_id(app, saga_id)
    with acting(who):
        what = retry_saga(app.runner, app.dispatch, sid, actor=who.display)
    app.drain()
    return {**status(app, sid), "retried": what}


def fork(app: App, saga_id: str, *, version: int, actor: Principal | str) -> dict[str, Any]:
    """A new saga at ready-for-review with that version's bytes."""
    from sagas.retry import fork_saga

    who = _person(app, actor, Permission.FORK)
    sid = _saga_id(app, saga_id)
    with acting(who):
        new = fork_saga(app.runner, sid, version=version, actor=who.display, actor_id=who.id)
    return {**status(app, new), "forked_from": {"saga_id": sid, "version": version}}


def _saga_id(app: App, prefix: str) -> str:
    with Session(app.engine) as s:
        return records.find_saga(s, prefix).id


__all__ = [
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

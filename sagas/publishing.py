"""The publishing tools: `publish` (high risk), `publish.status`, `publish.compensate`.

Each goes through the harness like any other tool: `publish` needs an
approval bound to (saga, version digest, destination set, session), its
business key is derived from (saga, destination, version digest), its status
probe asks the destination about that key, and its compensation undoes the
publish by key. Recorders update the step rows in the same transaction that
records the result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Table, and_, bindparam
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from orchestrator.core.errors import InvalidInput, NotFound, Refused
from orchestrator.harness.declare import high_risk, read_only, reversible_write
from orchestrator.harness.digests import business_key
from orchestrator.harness.links import LinkPolicy, describe, foreign_links
from orchestrator.harness.spec import ProbeAnswer, ToolContext, ToolResult, ToolSpec, ToolStatus
from orchestrator.store.db import UnitOfWork, one_read
from orchestrator.store.events import hold_chain
from orchestrator.store.tables import ApprovalRow, SagaRow, StepRow, VersionRow
from sagas import effect_checks, records
from sagas.destinations.base import Destination, PublishedVersion
from sagas.destinations.registry import scheme_of, slugify
from sagas.machine import SagaState
from sagas.step_records import put_step, set_step
from sagas.step_states import StepState
from telemetry import metrics

DIGEST = r"^[0-9a-f]{64}$"


class PublishArgs(BaseModel):
    """Publish one approved version of a saga to one of its destinations."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    saga_id: str = Field(min_length=1, max_length=64)
    destination: str = Field(
        min_length=3, max_length=2048, description="a URI from the saga's destination set"
    )
    version_digest: str = Field(pattern=DIGEST, description="sha256 of the approved version's markdown")


class CompensateArgs(BaseModel):
    """Undo the publish of one step, by its idempotency key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    saga_id: str = Field(min_length=1, max_length=64)
    destination: str = Field(min_length=3, max_length=2048)
    version_digest: str = Field(pattern=DIGEST)


class Receipt(BaseModel):
    model_config = ConfigDict(extra="allow")


def publish_key(args: PublishArgs | CompensateArgs) -> str:
    return business_key(args.saga_id, args.destination, args.version_digest)


class PublishingTools:
    """Builds the specs; holds how to open a destination and reach the database."""

    def __init__(
        self,
        engine: Any,
        open_destination: Any,
        roots: Sequence[Path] = (),
        link_hosts: frozenset[str] = frozenset(),
    ) -> None:
        self.engine = engine
        self.open_destination = open_destination
        self.roots = tuple(roots)
        self.links = LinkPolicy(link_hosts)

    def specs(self) -> list[ToolSpec]:
        return [
            high_risk(
                "publish",
                "Publish an approved version to one destination. High risk: needs a person's "
                "approval of this exact version and destination set; answered once per business key.",
                PublishArgs,
                self._publish,
                output=Receipt,
                key=publish_key,
                probe=self._probe,
                compensation="publish.compensate",
                approval=lambda a: (a.saga_id, a.version_digest, a.destination),
                recorder=self._record_publish,
                pre_execute=(self._publish_bound, self._within_roots),
            ),
            read_only(
                "publish.status",
                "Ask a destination whether the publish of a version under its key is applied.",
                PublishArgs,
                self._status,
            ),
            reversible_write(
                "publish.compensate",
                "Undo a publish by its key (a revert commit, a restored page, an HTTP DELETE).",
                CompensateArgs,
                self._compensate,
                key=lambda a: "undo-" + publish_key(a),
                recorder=self._record_compensation,
                pre_execute=(self._compensate_bound, self._within_roots),
                annotations={"internal": True},
            ),
        ]

    # -- executors ----------------------------------------------------------
    def _publish(self, ctx: ToolContext, args: PublishArgs) -> dict[str, Any]:
        with one_read(self.engine) as conn:
            found = conn.execute(
                _PUBLISH_INPUTS, {"saga_id": args.saga_id, "digest": args.version_digest}
            ).first()
        published = _published_version(args, found)
        if foreign := foreign_links(published.markdown, self.links):
            # Nothing leaves for any destination: not a link or image outside PRESSROOM_LINK_HOSTS.
            raise Refused(
                f"version {published.version} links outside PRESSROOM_LINK_HOSTS: {describe(foreign)}"
            )
        # Once more with the very bytes and path about to be used: the intent's
        # checks ran in another transaction, a moment ago.
        effect_checks.check_bytes(
            published.markdown, args.version_digest, version=published.version, title=published.title
        )
        effect_checks.within_roots(args.destination, self.roots)
        dest = self.open_destination(args.destination)
        started = time.monotonic()
        outcome = "error"
        try:
            receipt: dict[str, Any] = dest.publish(publish_key(args), published)
            outcome = "applied"
            return receipt
        finally:
            metrics.record_destination_latency(
                scheme_of(args.destination), time.monotonic() - started, outcome
            )

    def _status(self, ctx: ToolContext, args: PublishArgs) -> dict[str, Any]:
        with Session(self.engine) as s:
            effect_checks.status_bound(s, args.saga_id, args.destination, args.version_digest)
        effect_checks.within_roots(args.destination, self.roots)
        answer = self.open_destination(args.destination).status(publish_key(args))
        dumped: dict[str, Any] = answer.model_dump(mode="json")
        return dumped

    def _probe(self, ctx: ToolContext, key: str) -> ProbeAnswer:
        uri = ctx.arguments.destination if isinstance(ctx.arguments, PublishArgs) else self._uri_of(key)
        if uri is None:
            return ProbeAnswer(kind="unknown", detail="no step holds this key")
        answer = self.open_destination(uri).status(key)
        return ProbeAnswer(kind=answer.kind, receipt=answer.receipt, detail=answer.detail)

    def _compensate(self, ctx: ToolContext, args: CompensateArgs) -> dict[str, Any]:
        key = publish_key(args)
        with Session(self.engine) as s:
            step = s.exec(
                select(StepRow).where(StepRow.saga_id == args.saga_id, StepRow.uri == args.destination)
            ).first()
            receipt = (step.receipt if step else None) or {}
            if not receipt:  # its outcome was never known: what was sent is the version's title
                version = s.exec(
                    select(VersionRow).where(
                        VersionRow.saga_id == args.saga_id, VersionRow.digest == args.version_digest
                    )
                ).first()
                receipt = {"title": version.title} if version else {}
        done = self._compensate_by_key(ctx, key, receipt)
        # An irreversible destination's compensation is a correction: its receipt says so.
        return {"compensated": key, **({"receipt": done} if done else {})}

    def _uri_of(self, key: str) -> str | None:
        with Session(self.engine) as s:
            step = s.exec(select(StepRow).where(StepRow.idempotency_key == key)).first()
            return step.uri if step else None

    def _compensate_by_key(
        self, ctx: ToolContext, key: str, receipt: dict[str, Any]
    ) -> dict[str, Any] | None:
        args = ctx.arguments
        uri = args.destination if isinstance(args, PublishArgs | CompensateArgs) else self._uri_of(key)
        if uri is None:
            raise InvalidInput(f"no step holds key {key}")
        dest: Destination = self.open_destination(uri)
        return dest.compensate(key, receipt)

    # -- pre-execute checks (inside the transaction that commits the intent) -----
    def _publish_bound(self, uow: UnitOfWork, ctx: ToolContext, args: PublishArgs) -> None:
        effect_checks.publish_bound(uow.session, args.saga_id, args.destination, args.version_digest)

    def _within_roots(self, uow: UnitOfWork, ctx: ToolContext, args: PublishArgs | CompensateArgs) -> None:
        effect_checks.within_roots(args.destination, self.roots)

    def _compensate_bound(self, uow: UnitOfWork, ctx: ToolContext, args: CompensateArgs) -> None:
        effect_checks.compensate_bound(uow.session, args.saga_id, args.destination, args.version_digest)

    # -- recorders (inside the transaction that records the result) ------------
    def _record_publish(
        self, uow: UnitOfWork, ctx: ToolContext, args: PublishArgs, result: ToolResult
    ) -> None:
        if result.status is not ToolStatus.OK:
            return
        # The saga is locked (its chain, already held by the result's event): its step is read once.
        hold_chain(uow.session, args.saga_id)
        receipt = result.output if isinstance(result.output, dict) else {"value": result.output}
        put_step(
            uow.session,
            args.saga_id,
            args.destination,
            StepState.DONE,
            actor=ctx.actor,
            key=publish_key(args),
            receipt=receipt,
            version_digest=args.version_digest,
        )
        # The saga's own transitions are its runner's (`sagas.decider` decides them).

    def _record_compensation(
        self, uow: UnitOfWork, ctx: ToolContext, args: CompensateArgs, result: ToolResult
    ) -> None:
        if result.status is not ToolStatus.OK:
            return
        s = uow.session
        saga = records.load_saga(s, args.saga_id)
        step = _step(s, saga, args.destination)
        set_step(s, step, StepState.COMPENSATED, actor=ctx.actor)


# What the executor reads before the effect, in one statement: the saga's state, destinations
# and head, the head version found by its number (with its digest, to compare with the call's,
# and its bytes) and the approver of its latest consumed approval (the person the publish runs
# under). A digest alone names no version: two versions may hold the same bytes.
_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_VERSIONS: Table = VersionRow.__table__  # type: ignore[attr-defined]
_APPROVALS: Table = ApprovalRow.__table__  # type: ignore[attr-defined]
_APPROVER = (
    sa_select(_APPROVALS.c.approver)
    .where(
        _APPROVALS.c.saga_id == _SAGAS.c.id,
        _APPROVALS.c.version == _SAGAS.c.head_version,
        _APPROVALS.c.version_digest == bindparam("digest"),
        _APPROVALS.c.consumed_at.is_not(None),
    )
    .order_by(_APPROVALS.c.consumed_at.desc())
    .limit(1)
    .scalar_subquery()
)
_PUBLISH_INPUTS = (
    sa_select(
        _SAGAS.c.state,
        _SAGAS.c.destinations,
        _SAGAS.c.head_version,
        _VERSIONS.c.number,
        _VERSIONS.c.digest,
        _VERSIONS.c.title,
        _VERSIONS.c.markdown,
        _APPROVER.label("approver"),
    )
    .select_from(
        _SAGAS.outerjoin(
            _VERSIONS, and_(_VERSIONS.c.saga_id == _SAGAS.c.id, _VERSIONS.c.number == _SAGAS.c.head_version)
        )
    )
    .where(_SAGAS.c.id == bindparam("saga_id"))
)


def _published_version(args: PublishArgs, found: Sequence[Any] | None) -> PublishedVersion:
    """The version a publish sends, or why it may not: checked on what `_PUBLISH_INPUTS` read."""
    if found is None:
        raise NotFound(f"no saga {args.saga_id!r}", saga_id=args.saga_id)
    values: tuple[Any, ...] = tuple(found)
    state, destinations, head, number, digest, title, markdown, approver = values
    if args.destination not in destinations:
        raise InvalidInput(f"{args.destination} is not a destination of saga {args.saga_id}")
    if number is None:
        raise InvalidInput(f"saga {args.saga_id} has no version {head}")
    if digest != args.version_digest:
        raise Refused(
            f"digest {args.version_digest[:12]}… is not that of version {number}, the head of saga "
            f"{args.saga_id}"
        )
    if state not in (SagaState.APPROVED, SagaState.EXECUTING):
        raise Refused(f"saga {args.saga_id} is {state}; publishing needs approved or executing")
    return PublishedVersion(
        saga_id=args.saga_id,
        version=number,
        version_digest=args.version_digest,
        title=title,
        slug=slugify(title),
        markdown=markdown,
        approver=approver,
    )


def _step(s: Session, saga: SagaRow, uri: str) -> StepRow:
    step = s.exec(select(StepRow).where(StepRow.saga_id == saga.id, StepRow.uri == uri)).first()
    if step is None:
        step = StepRow(saga_id=saga.id, uri=uri, position=saga.destinations.index(uri))
    return step


__all__ = ["CompensateArgs", "PublishArgs", "PublishingTools", "publish_key"]

"""The role handler: one for every role kind, driven by the saga's declared pipeline.

For one handoff it checks that the message belongs to the saga's current
preparation round (a message of an earlier round changes nothing), finds the
pipeline role it names and that role's kind, verifies the capability handle
the handoff carries (signature, saga, role, expiry: `harness.handles`; a
handoff without one is refused like a forged one, unless its work row records
none either: work an earlier release queued gets the handle its grant mints),
takes the capabilities from it alone (refusing a handle wider than the kind's
table and the role's declared tools), and runs the kind's turn (planner and harness,
outside any transaction). The finalizer it returns runs in the consumer's
transaction: it locks the saga, checks state and round again, lets the turn
write what it made, and records the run's outcome (`roles.rounds.finish_run`),
which decides and sends what follows. No handler names the next role.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from orchestrator.core.errors import PolicyRefused
from orchestrator.core.pipeline import Pipeline, RoleDecl
from orchestrator.harness.capabilities import narrow, require_within
from orchestrator.harness.handles import Handle, HandleRefused, admit, verify
from orchestrator.store.db import UnitOfWork, unit_of_work
from orchestrator.store.events import add_event
from orchestrator.store.work import queued_before_handles
from orchestrator.toolpath.engine import Caller
from outbox.handlers import Finalizer, noop
from outbox.messages import Handoff
from roles.kinds import RoleKind, kinds
from roles.llm_planner import with_settings_model
from roles.mcp_turn import mcp_tools
from roles.plans import kind_of
from roles.rounds import finish_run, role_grant, saga_pipeline, start_chosen
from roles.turn import RolePorts, TurnContext, Turned
from sagas import records
from sagas.machine import SagaState
from sagas.preparation import every_role
from telemetry import names


def capabilities_for(kind: RoleKind | str, handle: Handle, role: RoleDecl | None = None) -> frozenset[str]:
    """What a role of `kind` may do under `handle`: its actions, refused when wider than the
    kind's table and the `mcp:` tools `role` declares (C_child ⊆ C_parent ∩ C_task)."""
    role_kind = kind if isinstance(kind, RoleKind) else kinds()[kind]
    asked = frozenset(handle.actions)
    table = role_kind.capabilities | frozenset(role.tools if role else ())
    require_within(asked, table, who=f"a handoff to the {role_kind.name}")
    return narrow(asked, table, table)


def admitted(ports: RolePorts, handoff: Handoff, role: str, corpus: str) -> Handle:
    """The handoff's handle, verified and bound to its saga, `role` and the saga's `corpus`;
    `HandleRefused` if not."""
    if not handoff.handle and (minted := _for_earlier_work(ports, handoff, role)) is not None:
        return minted
    handle = verify(handoff.handle, ports.signing_key)
    fault = admit(handle, saga_id=handoff.saga_id, role=role, now=ports.clock.now(), corpus=corpus)
    if fault is not None:
        raise HandleRefused(fault)
    return handle


def _for_earlier_work(ports: RolePorts, handoff: Handoff, role: str) -> Handle | None:
    """The handle the dispatcher would have minted, for work a release before handles queued
    (its work row records no handle: `queued_before_handles`), with a `capability minted`
    event; None for any other handoff without one. A rolling upgrade's in-flight work goes on
    under exactly the grant it would have had; a message cannot earn one by dropping its own."""
    with unit_of_work(ports.engine) as uow:
        if not queued_before_handles(uow.session, handoff.work_id, handoff.model_dump(mode="json")):
            return None
        saga = records.load_saga(uow.session, handoff.saga_id)
        pipeline = saga_pipeline(uow.session, saga)
        decl = pipeline.role(role)
        grant = role_grant(saga, kind_of(pipeline, decl).capabilities, decl)
        handle = grant.mint(handle_id=handoff.work_id, saga_id=saga.id, now=ports.clock.now())
        add_event(
            uow.session,
            saga_id=saga.id,
            actor=role,
            kind="capability",
            status="minted",
            detail={
                "work_id": handoff.work_id,
                "why": "queued by a release before capability handles",
                "actions": sorted(handle.actions),
            },
        )
    return handle


def refused_event(handoff: Handoff, role: str, exc: HandleRefused | PolicyRefused) -> dict[str, Any]:
    """The event a refused handoff leaves in its saga's log (with the run's failure)."""
    problem = exc.fault.problem.value if isinstance(exc, HandleRefused) else "widened"
    return {
        "saga_id": handoff.saga_id,
        "actor": role,
        "kind": "capability",
        "status": "refused",
        "detail": {"work_id": handoff.work_id, "problem": problem, "reason": str(exc)},
    }


def handle_role(ports: RolePorts, kind_name: str, handoff: Handoff, holder: str) -> Finalizer:
    """The work of one handoff to a role of kind `kind_name` (the task's kind)."""
    kind = kinds()[kind_name]
    if _from_before_rounds(ports, handoff):
        return _first_round(ports, handoff)
    found = _current(ports, kind, handoff)
    if found is None:
        return noop
    pipeline, role, corpus = found
    try:
        handle = admitted(ports, handoff, role.name, corpus)
        caps = capabilities_for(kind, handle, role)
    except (HandleRefused, PolicyRefused) as exc:
        event = refused_event(handoff, role.name, exc)
        return _finalizer(ports, handoff, role.name, Turned.failed(f"refused handoff: {exc}", event))
    caller = Caller(
        actor=role.name,
        # Only what the handle grants: the kind's actions and the `mcp:SERVER/TOOL` tools the
        # pipeline role declares (`roles.rounds.role_grant` mints it).
        capabilities=caps,
        handle=handle,
        saga_id=handoff.saga_id,
        span_attributes={names.ATTR_SAGA_ID: handoff.saga_id},
        request_id=holder,
    )
    ctx = TurnContext(ports, handoff, holder, pipeline, role, kind, caller)
    with mcp_tools(ctx) as turn_ctx:  # the role's MCP sessions last as long as its turn
        turned: Turned = kind.turn(turn_ctx)
    return _finalizer(ports, handoff, role.name, turned)


def _current(ports: RolePorts, kind: RoleKind, handoff: Handoff) -> tuple[Pipeline, RoleDecl, str] | None:
    """The saga's pipeline, the role the handoff names and the saga's corpus, when the handoff is for the saga's
    current round, that role is of this kind, and (for a reviewer) the head is the version
    it names; None otherwise (a message of an earlier round, or one for another saga state)."""
    with Session(ports.engine) as s:
        saga = records.load_saga(s, handoff.saga_id)
        if saga.state != SagaState.PREPARING or handoff.round != saga.prep_round:
            return None
        if kind.produces == "verdict" and handoff.version != saga.head_version:
            return None
        # `PRESSROOM_MODEL` plans the deterministic writers of any pipeline (a "settings" profile).
        pipeline = with_settings_model(saga_pipeline(s, saga), ports.settings)
        corpus = saga.corpus
    name = handoff.role or kind.name
    role = next((r for r in pipeline.roles if r.name == name), None)
    if role is None or role.kind != kind.name:
        return None
    return pipeline, role, corpus


def _from_before_rounds(ports: RolePorts, handoff: Handoff) -> bool:
    """A saga that was preparing when the pipelines came (its round is 0, it has no runs)."""
    with Session(ports.engine) as s:
        saga = records.load_saga(s, handoff.saga_id)
        return saga.state == SagaState.PREPARING and saga.prep_round == 0


def _first_round(ports: RolePorts, handoff: Handoff) -> Finalizer:
    """Prepare such a saga again from its first role, as a round of its pipeline: its older
    message would otherwise finish a run no round holds, and the saga would wait forever."""

    def finalize(uow: UnitOfWork) -> None:
        saga = records.load_saga(uow.session, handoff.saga_id, lock=True)
        if saga.state == SagaState.PREPARING and saga.prep_round == 0:
            start_chosen(
                uow,
                ports.dispatch,
                saga,
                every_role,
                max_revisions=ports.settings.max_review_rounds,
                actor="coordinator",
            )

    return finalize


def _finalizer(ports: RolePorts, handoff: Handoff, role: str, turned: Turned) -> Finalizer:
    """Write the turn's loop stop, then (if the saga is still in this round) what the turn
    made and the run's outcome, in the consumer's transaction: a run whose result is not
    kept (a duplicate, a lost lease) leaves nothing behind."""

    def finalize(uow: UnitOfWork) -> None:
        if turned.stop_event:
            ports.tools.store.record_event(**turned.stop_event, tx=uow)
        s = uow.session
        saga = records.load_saga(s, handoff.saga_id, lock=True)
        if saga.state != SagaState.PREPARING or saga.prep_round != handoff.round:
            return
        outcome = turned.write(s, saga)
        finish_run(uow, ports.dispatch, saga, role, outcome, max_revisions=ports.settings.max_review_rounds)

    return finalize


__all__ = ["RolePorts", "admitted", "capabilities_for", "handle_role"]

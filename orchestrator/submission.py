"""`submit`: a brief, a corpus, destinations and a pipeline in; a saga preparing, its research queued.

The pipeline (`--pipeline NAME`, default `default`) is loaded and checked
here, then stored with the saga as an artifact (`orchestrator.pipeline_artifact`):
the saga runs that copy, whatever happens to the file later.

With a request id, a retried submit returns the saga the first one made.
Destinations are checked here before anything is written: at most
`PRESSROOM_MAX_DESTINATIONS`, each in its one spelling and named once, and
each `webhook:` host resolved and refused unless every address is public or
in `PRESSROOM_WEBHOOK_ALLOW` (checked again at the effect).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError

from orchestrator import pipeline_files
from orchestrator.core.clock import Clock
from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput
from orchestrator.core.pipeline import Pipeline
from orchestrator.harness.principals import Permission, Principal, acting
from orchestrator.people import permitted
from orchestrator.pipeline_artifact import store_pipeline
from orchestrator.ports import Dispatch, Drain, Sessions, Transact
from orchestrator.reads.queries import Reads
from orchestrator.store import submit_requests
from orchestrator.store.harness_store import add_event
from orchestrator.store.people import PeopleStore
from orchestrator.store.tables import SagaRow
from roles import rounds
from roles.index import CorpusIndexes
from sagas.destinations.registry import (
    check_at_submit,
    is_file_based,
    normalise_destination,
    parse_destination,
)
from sagas.machine import SagaState
from sagas.preparation import every_role
from telemetry import propagation
from telemetry.saga_trace import saga_span

MAX_BRIEF = 4000


def _within(roots: list[Path], path: Path, what: str) -> None:
    """With PRESSROOM_ALLOWED_ROOTS set, refuse a path outside every root."""
    if not roots:
        return
    resolved = path.resolve()
    if not any(resolved == r or r in resolved.parents for r in roots):
        raise InvalidInput(f"{what} {path} is outside the allowed roots (PRESSROOM_ALLOWED_ROOTS)")


def _one_each(destinations: list[str]) -> list[str]:
    """Refuse a destination named twice (after normalising: two spellings of one endpoint)."""
    seen: set[str] = set()
    for uri in destinations:
        if uri in seen:
            raise InvalidInput(f"destination {uri} is named twice (after normalising its spelling)", uri=uri)
        seen.add(uri)
    return destinations


class Submissions:
    """`submit` and the corpus index it refreshes.

    `settings` gives PRESSROOM_MAX_DESTINATIONS, PRESSROOM_WEBHOOK_ALLOW,
    PRESSROOM_ALLOWED_ROOTS, the pipelines folder and PRESSROOM_MAX_REVIEW_ROUNDS.
    `memory_destinations` lets `memory:` destinations in (tests and `pressroom
    eval` only, never a setting).
    """

    def __init__(
        self,
        *,
        transact: Transact,
        sessions: Sessions,
        dispatch: Dispatch,
        drain: Drain,
        reads: Reads,
        people: PeopleStore,
        indexes: CorpusIndexes | None,
        settings: Settings,
        clock: Clock,
        memory_destinations: bool = False,
    ) -> None:
        self._transact = transact
        self._sessions = sessions
        self._dispatch = dispatch
        self._drain = drain
        self._reads = reads
        self._people = people
        self._indexes = indexes
        self._settings = settings
        self._clock = clock
        self._memory_destinations = memory_destinations

    def _checked_destinations(self, destinations: list[str], roots: list[Path]) -> list[str]:
        """The destinations in their stored spelling; `InvalidInput` naming the first one refused."""
        most = self._settings.max_destinations
        if len(destinations) > most:
            raise InvalidInput(
                f"{len(destinations)} destinations; a saga may have at most {most} (PRESSROOM_MAX_DESTINATIONS)"
            )
        destinations = _one_each(
            [normalise_destination(u, allow_memory=self._memory_destinations) for u in destinations]
        )
        for uri in destinations:
            if is_file_based(uri):
                _within(roots, Path(parse_destination(uri)[1]).expanduser(), "destination")
            # A webhook's host, an email's recipient domains: checked again at the effect.
            check_at_submit(uri, self._settings)
        return destinations

    def submit(
        self,
        *,
        brief: str,
        corpus: str,
        destinations: list[str],
        actor: Principal | str,
        request_id: str | None = None,
        pipeline: str | None = None,
    ) -> dict[str, Any]:
        """Start a saga that runs `pipeline` (a name; None: the default). With `request_id`, a
        retry returns the saga the first call made (`"replayed": true`) instead of making another."""
        who = permitted(self._people, actor, Permission.SUBMIT)
        with acting(who):
            return self._submit(
                brief=brief,
                corpus=corpus,
                destinations=destinations,
                who=who,
                request_id=request_id,
                pipeline=pipeline,
            )

    def _submit(
        self,
        *,
        brief: str,
        corpus: str,
        destinations: list[str],
        who: Principal,
        request_id: str | None,
        pipeline: str | None,
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
        roots = self._settings.roots()
        _within(roots, root, "corpus folder")
        destinations = self._checked_destinations(destinations, roots)
        plan = pipeline_files.load(self._settings, pipeline)  # unknown: NotFound; a bad file: one line
        digest = ""
        if request_id is not None:
            request_id = submit_requests.check_request_id(request_id)
            digest = submit_requests.args_digest(
                brief=brief,
                corpus=str(root.resolve()),
                destinations=list(destinations),
                actor=who.id,
                pipeline=plan.name,
            )
            with self._sessions() as s:
                made = submit_requests.find(s, request_id, digest)
            if made is not None:
                return {**self._reads.status(made), "request_id": request_id, "replayed": True}
        try:
            saga_id = self._start_saga(brief, root, destinations, who, request_id, digest, plan)
        except IntegrityError:
            if request_id is None:
                raise
            with self._sessions() as s:  # a twin of this request committed first
                made = submit_requests.find(s, request_id, digest)
            if made is None:
                raise
            return {**self._reads.status(made), "request_id": request_id, "replayed": True}
        self._drain()
        out = self._reads.status(saga_id)
        return {**out, "request_id": request_id, "replayed": False} if request_id else out

    def _start_saga(
        self,
        brief: str,
        root: Path,
        destinations: list[str],
        who: Principal,
        request_id: str | None,
        digest: str,
        plan: Pipeline,
    ) -> str:
        actor = who.display
        submitted = self._clock.now()
        indexed = self.refresh_index(root)  # research then reads nothing this walk saw unchanged
        with self._transact() as uow:
            saga = SagaRow(
                brief=brief,
                corpus=str(root.resolve()),
                destinations=list(destinations),
                state=SagaState.PREPARING.value,
                created_by=actor,
                created_by_id=who.id,
                created_at=submitted,
                pipeline=plan.name,
            )
            with saga_span("submit", saga):
                # The saga's trace starts here; every later message and command joins it.
                saga.trace_context = propagation.inject_context()
                uow.session.add(saga)
                uow.session.flush()
                saga.pipeline_digest = store_pipeline(uow.session, saga.id, plan)  # the saga runs this copy
                add_event(
                    uow.session,
                    saga_id=saga.id,
                    actor=actor,
                    kind="saga",
                    status="submitted",
                    detail={
                        "destinations": destinations,
                        "corpus": saga.corpus,
                        "index": indexed,
                        "pipeline": plan.name,
                        "pipeline_digest": saga.pipeline_digest,
                    },
                )
                # The first round: every role of the pipeline, the first ones queued now.
                rounds.start_chosen(
                    uow,
                    self._dispatch,
                    saga,
                    every_role,
                    max_revisions=self._settings.max_review_rounds,
                    actor=actor,
                )
                if request_id is not None:
                    submit_requests.record(uow.session, request_id, saga.id, digest)
            return saga.id

    def refresh_index(self, root: Path) -> dict[str, int]:
        """Bring the corpus index of `root` up to date; counts of files added, changed, removed, unchanged."""
        if self._indexes is None:
            return {}
        done = self._indexes.for_corpus(root).refresh()
        return {
            "added": len(done.added),
            "changed": len(done.changed),
            "removed": len(done.removed),
            "unchanged": done.unchanged,
        }

    def index_corpus(self, corpus: str) -> dict[str, Any]:
        """`pressroom index`: build or refresh the index of one corpus folder."""
        root = Path(corpus).expanduser()
        if not root.is_dir():
            raise InvalidInput(f"corpus folder not found: {corpus}")
        _within(self._settings.roots(), root, "corpus folder")
        if self._indexes is None:
            raise InvalidInput("this app has no corpus index")
        return self._indexes.for_corpus(root).refresh().summary()


__all__ = ["MAX_BRIEF", "Submissions"]

"""The partial indexes' predicates, written as SQL literals beside the tables, name the
states the pure machine calls final and waiting."""

from __future__ import annotations

import re

from orchestrator.store.tables import FINISHED_STATES_SQL, WAITING_SQL
from sagas.machine import TERMINAL, SagaState


def test_the_predicates_name_the_machines_states() -> None:
    assert set(re.findall(r"'([a-z-]+)'", FINISHED_STATES_SQL)) == {state.value for state in TERMINAL}
    assert re.findall(r"'([a-z-]+)'", WAITING_SQL) == [SagaState.READY_FOR_REVIEW.value]

"""A role worker that dies inside a keyed tool call no longer fails its saga (two chaos findings).

The reproductions in `chaos/repro_role_crash.py` run the real in-process
pipeline on SQLite: the executor dies after the call's intent committed. A
`reversible_write` (idempotent by contract) found pending with its claim run
out is run again under its key instead of being called uncertain; a re-run
that meets the dead call's claim still held is deferred to its lease instead
of ending the turn.
"""

from __future__ import annotations

import pytest

from chaos import repro_role_crash


@pytest.mark.parametrize(
    "args",
    [["review.record"], ["draft.write"], ["draft.write", "--during-claim"]],
    ids=["review-record", "draft-write", "during-claim"],
)
def test_a_worker_death_inside_a_role_tool_leaves_the_saga_going(args: list[str]) -> None:
    assert repro_role_crash.main(args) == 0

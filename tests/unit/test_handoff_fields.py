"""A handoff from a later release: fields this release does not know are ignored, so a
worker of this release takes it during a rolling upgrade; a known field of the wrong type
is still refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from outbox.messages import Handoff

BODY = {"saga_id": "s1", "work_id": "w1", "round": 2, "role": "draft"}


def test_a_field_added_later_is_ignored() -> None:
    later = Handoff.model_validate({**BODY, "added_later": {"mode": "x"}, "priority": 3})
    assert later == Handoff.model_validate(BODY)
    assert "added_later" not in later.model_dump()


def test_a_known_field_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(ValidationError, match="round"):
        Handoff.model_validate({**BODY, "round": "oops"})

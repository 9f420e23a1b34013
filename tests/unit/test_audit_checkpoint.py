"""`audit_checkpoint.parse` and `compare`: pure, no database."""

from __future__ import annotations

import json

import pytest

from orchestrator.audit_checkpoint import FORMAT, compare, parse
from orchestrator.core.errors import InvalidInput, Refused
from orchestrator.harness.event_chain import chain_key, checkpoint_mac

KEY = chain_key(b"k")


def signed(sagas: dict[str, dict[str, object]], key: bytes = KEY) -> str:
    body = {"format": FORMAT, "created_at": "t", "events": 3, "last_seq": 3, "sagas": sagas}
    return json.dumps({**body, "mac": checkpoint_mac(key, body)})


def test_compare_finds_removed_and_rewritten_history() -> None:
    cp = parse(signed({"s": {"count": 2, "last_seq": 5, "head": "h2"}}), KEY)
    assert compare(cp, "s", [(1, "h1"), (5, "h2"), (9, "h3")])["problem"] is None
    assert "was removed" in compare(cp, "s", [(1, "h1")])["problem"]
    assert "was rewritten" in compare(cp, "s", [(1, "h1"), (5, "hX"), (9, "h3")])["problem"]
    assert "was rewritten" in compare(cp, "s", [(1, "h1"), (6, "h2")])["problem"]
    assert compare(cp, "other", []) == {"listed": False, "count": 0, "problem": None}


def test_parse_refuses_another_key_and_malformed_files() -> None:
    with pytest.raises(Refused, match="not signed with this database's key"):
        parse(signed({}, chain_key(b"other")), KEY)
    with pytest.raises(InvalidInput, match="is not JSON"):
        parse("{", KEY)
    with pytest.raises(InvalidInput, match="not a Pressroom audit checkpoint"):
        parse(json.dumps({"format": "x"}), KEY)
    with pytest.raises(InvalidInput, match="malformed"):
        parse(signed({"s": {"count": "2", "last_seq": 5, "head": "h"}}), KEY)

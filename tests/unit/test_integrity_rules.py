"""The pure rules behind the integrity checks: destination spellings, strict JSON,
duplicate-key marking for MCP messages, duration bounds, saga-binding tables."""

from __future__ import annotations

import json
import os

import pytest

from orchestrator.core.durations import MAX_DURATION_DAYS, parse_duration
from orchestrator.core.errors import InvalidInput
from orchestrator.entrypoints.mcp_json import (
    DUPLICATE_META,
    duplicate_arguments,
    holds_duplicate,
    mark_duplicates,
)
from orchestrator.harness.parse import DuplicateKey, ParseRefused, bounded_parse, strict_loads
from sagas.destinations.registry import normalise_destination
from sagas.effect_checks import COMPENSABLE, PUBLISH_STATES, STATUS_STATES
from sagas.machine import SagaState


@pytest.mark.parametrize("spelling", ["/srv/x", "//srv/x/", "/./srv/x", "/srv//x", "///srv/./x/"])
def test_one_folder_has_one_spelling(spelling: str) -> None:
    assert normalise_destination(f"site:{spelling}") == "site:/srv/x"
    assert normalise_destination(f"git:{spelling}") == "git:/srv/x"


def test_a_relative_folder_becomes_absolute() -> None:
    assert normalise_destination("site:out/site") == f"site:{os.path.join(os.getcwd(), 'out', 'site')}"


@pytest.mark.parametrize(
    "uri",
    [
        "site:/srv/x\x00",
        "site:/srv/\x1b[31mx",
        "git:/srv/x\n",
        "site:/srv/\u200bx",
        "webhook:http://h/\u202ex",
    ],
)
def test_control_and_invisible_characters_are_refused(uri: str) -> None:
    with pytest.raises(InvalidInput, match="control character") as caught:
        normalise_destination(uri)
    assert caught.value.exit_code == 2


def test_dot_dot_is_refused_before_normalising() -> None:
    with pytest.raises(InvalidInput, match=r"'\.\.'"):
        normalise_destination("site:/srv/x/../../etc")


def test_memory_only_when_enabled() -> None:
    with pytest.raises(InvalidInput, match="tests only"):
        normalise_destination("memory:demo")
    assert normalise_destination("memory:demo", allow_memory=True) == "memory:demo"


def test_webhook_urls_are_kept_as_written() -> None:
    assert normalise_destination("webhook:http://127.0.0.1:9/h?a=1") == "webhook:http://127.0.0.1:9/h?a=1"


def test_strict_loads_refuses_a_key_named_twice_at_any_depth() -> None:
    with pytest.raises(DuplicateKey) as caught:
        strict_loads('{"a": {"b": 1, "b": 2}}', 8)
    assert caught.value.key == "b"
    assert strict_loads('{"a": {"b": 1}, "b": 2}', 8) == {"a": {"b": 1}, "b": 2}


def test_strict_loads_bounds_nesting_before_decoding() -> None:
    with pytest.raises(ParseRefused, match="deeper than 16"):
        strict_loads("[" * 100_000 + "]" * 100_000, 16)


def test_bounded_parse_refuses_duplicate_argument_keys() -> None:
    with pytest.raises(ParseRefused, match="duplicate key 'saga_id'"):
        bounded_parse('{"saga_id": "a", "saga_id": "b"}')


def test_a_tools_call_with_a_duplicate_key_is_marked_with_its_arguments_as_sent() -> None:
    line = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"x":1,"x":2}}}'
    marked = json.loads(mark_duplicates(line))
    assert marked["id"] == 7 and marked["params"]["arguments"] == {"x": 2}
    found = duplicate_arguments(marked["params"]["_meta"])
    assert found is not None
    reason, sent = found
    assert "duplicate key 'x'" in reason and sent == '{"x":1,"x":2}' and holds_duplicate(sent)


def test_clean_and_unparseable_messages_pass_unchanged() -> None:
    clean = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":1}}}'
    assert mark_duplicates(clean) == clean
    assert mark_duplicates("{not json") == "{not json"
    other = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"a":2}}'
    assert DUPLICATE_META not in mark_duplicates(other)


def test_a_forged_note_without_a_duplicate_is_not_trusted() -> None:
    assert not holds_duplicate('{"x": 1}')
    assert duplicate_arguments({"other": 1}) is None


@pytest.mark.parametrize("text", ["99999999999d", "9" * 400, f"{MAX_DURATION_DAYS + 1}d"])
def test_durations_beyond_the_bound_are_bad_input(text: str) -> None:
    with pytest.raises(InvalidInput, match="at most"):
        parse_duration(text)
    assert parse_duration(f"{MAX_DURATION_DAYS}d").days == MAX_DURATION_DAYS


def test_the_binding_tables_follow_the_runner() -> None:
    assert PUBLISH_STATES == {SagaState.APPROVED, SagaState.EXECUTING}
    assert SagaState.SUCCEEDED not in STATUS_STATES and SagaState.EFFECT_UNKNOWN in STATUS_STATES
    # The runner undoes done steps; only an operator's cancel of an effect-unknown saga touches uncertain ones.
    assert COMPENSABLE[SagaState.EXECUTING] == {"done"}
    # An operator's takedown of a succeeded saga's page: a done step, or one whose takedown failed.
    assert COMPENSABLE[SagaState.SUCCEEDED] == {"done", "compensation-failed"}
    assert set(COMPENSABLE) == {SagaState.EXECUTING, SagaState.EFFECT_UNKNOWN, SagaState.SUCCEEDED}

"""Bounded parse: every limit (bytes, depth, string length, items) and the shapes it refuses."""

from __future__ import annotations

import json
import random

import pytest

from evaluation.faults import Bench, call
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.harness.parse import DEFAULT_LIMITS, ParseLimits, ParseRefused, bounded_parse
from orchestrator.harness.spec import ToolStatus
from tests.support.rigs import MALFORMED, malformed_proposals

SMALL = ParseLimits(max_bytes=200, max_depth=3, max_string=10, max_items=4)


@pytest.mark.parametrize("raw", ['{"a": 1}', b'{"a": 1}', {"a": 1}])
def test_an_object_within_limits_parses_from_text_bytes_or_dict(raw: str | bytes | dict[str, int]) -> None:
    assert bounded_parse(raw, SMALL) == {"a": 1}


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({"a": "x" * 300}),
        json.dumps({"k": "x" * 300}).encode(),
        {"a": "x" * 300},
    ],
    ids=["text", "bytes", "dict"],
)
def test_more_bytes_than_the_limit_are_refused(raw: str | bytes | dict[str, str]) -> None:
    limits = ParseLimits(max_bytes=200, max_depth=8, max_string=10_000, max_items=100)
    with pytest.raises(ParseRefused, match="exceed 200 bytes"):
        bounded_parse(raw, limits)


def test_the_byte_limit_counts_utf8_bytes_not_characters() -> None:
    limits = ParseLimits(max_bytes=20, max_string=100)
    assert bounded_parse('{"a": "ééé"}', limits)  # 15 bytes
    with pytest.raises(ParseRefused, match="bytes"):
        bounded_parse('{"a": "éééééééé"}', limits)  # 9 characters, 23 bytes


def test_nesting_deeper_than_the_limit_is_refused_at_the_boundary() -> None:
    assert bounded_parse({"a": {"b": 1}}, SMALL) == {"a": {"b": 1}}  # the leaf sits at depth 3
    assert bounded_parse({"a": [1, 2]}, SMALL)
    with pytest.raises(ParseRefused, match="deeper than 3"):
        bounded_parse({"a": {"b": {"c": 1}}}, SMALL)
    with pytest.raises(ParseRefused, match="deeper than 3"):
        bounded_parse('{"a": [[[]]]}', SMALL)


def test_a_string_longer_than_the_limit_is_refused_in_values_and_keys() -> None:
    assert bounded_parse({"a": "x" * 10}, SMALL)
    with pytest.raises(ParseRefused, match="exceeds 10 characters"):
        bounded_parse({"a": "x" * 11}, SMALL)
    with pytest.raises(ParseRefused, match="exceeds 10 characters"):
        bounded_parse({"k" * 11: 1}, SMALL)
    with pytest.raises(ParseRefused, match="exceeds 10 characters"):
        bounded_parse({"a": ["ok", "y" * 11]}, SMALL)


def test_too_many_keys_or_items_are_refused() -> None:
    assert bounded_parse({"a": [1, 2, 3, 4]}, SMALL)
    with pytest.raises(ParseRefused, match="more than 4 items"):
        bounded_parse({"a": [1, 2, 3, 4, 5]}, SMALL)
    with pytest.raises(ParseRefused, match="more than 4 keys"):
        bounded_parse({str(i): i for i in range(5)}, SMALL)


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42", "null", "true"])
def test_arguments_must_be_a_json_object(raw: str) -> None:
    with pytest.raises(ParseRefused, match="must be a JSON object"):
        bounded_parse(raw)


def test_invalid_json_is_refused_with_where_it_broke() -> None:
    with pytest.raises(ParseRefused, match=r"not valid JSON: .* at position \d+"):
        bounded_parse('{"saga_id": ')


def test_the_default_limits_are_the_documented_ones() -> None:
    assert DEFAULT_LIMITS == ParseLimits(
        max_bytes=64 * 1024, max_depth=8, max_string=32 * 1024, max_items=1000
    )


def test_a_nesting_bomb_within_the_byte_limit_is_refused_before_decoding() -> None:
    # ~20k brackets would exhaust the JSON decoder's recursion (RecursionError) if it ran first.
    bomb = '{"a": ' + "[" * 20000 + "]" * 20000 + "}"
    assert len(bomb.encode()) < DEFAULT_LIMITS.max_bytes
    with pytest.raises(ParseRefused, match="deeper than 8"):
        bounded_parse(bomb)
    assert bounded_parse('{"a": "' + "[" * 18 + '"}') == {"a": "[" * 18}  # brackets in strings do not count


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(ParseRefused, match="not UTF-8"):
        bounded_parse(b'{"a": "\xff"}')


# -- through the engine -------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_every_malformed_kind_is_rejected_before_the_executor(kind: str) -> None:
    b = Bench(MemoryHarnessStore())
    b.approve()  # a valid approval: only the schema stands between the proposal and the executor
    result = b.harness.call(call("publish", MALFORMED[kind](b, random.Random(1))), b.caller())
    assert result.status is ToolStatus.REJECTED
    assert result.reason
    assert b.dest.calls == 0


def test_malformed_generator_counts_only_rejections_before_any_call() -> None:
    report = malformed_proposals(MemoryHarnessStore(), n=len(MALFORMED) * 2, seed=3)
    assert report["executor_calls"] == 0
    assert all(k == {"sent": 2, "rejected": 2, "escaped": 0} for k in report["by_kind"].values())
    assert report["rejected_before_call"] == report["sent"]

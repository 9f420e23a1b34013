"""The small rules behind the pipeline surfaces, without services: what `pipelines show` prints
of an endpoint, the stored pipeline artifact, and how a pipeline enters the submit keys."""

from __future__ import annotations

import pytest

from orchestrator.core.pipeline import Pipeline, parse_pipeline
from orchestrator.pipeline_artifact import PipelineArtifact
from orchestrator.pipeline_catalog import _endpoint, describe
from orchestrator.saga_tools import SubmitArgs, submit_key
from orchestrator.store.submit_requests import args_digest
from roles.kinds import kind_infos
from tests.support.pipelines import HOUSE, PAIR


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://editor:hunter2@127.0.0.1:9/v1?token=x#f", "http://127.0.0.1:9/v1"),
        ("https://api.example.com/v1", "https://api.example.com/v1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("http://host:notaport/v1", None),  # not a URL one can read a port from: nothing shown
        (None, None),
    ],
)
def test_an_endpoint_is_shown_without_credentials_query_or_fragment(
    url: str | None, shown: str | None
) -> None:
    assert _endpoint(url) == shown


def _parsed(name: str, text: str) -> Pipeline:
    import roles.builtin_kinds  # noqa: F401  (registers the kinds the files name)

    return parse_pipeline(name, text, source=f"{name}.toml", kinds=kind_infos())


def test_the_stored_artifact_reads_back_as_the_pipeline_and_its_digest_is_stable() -> None:
    house = _parsed("house", HOUSE)
    body = PipelineArtifact.of(house).model_dump(mode="json")
    assert body == house.model_dump(mode="json", by_alias=True)
    assert Pipeline.model_validate(body) == house
    assert PipelineArtifact.of(house).digest() == PipelineArtifact.of(_parsed("house", HOUSE)).digest()
    assert PipelineArtifact.of(house).digest() != PipelineArtifact.of(_parsed("pair", PAIR)).digest()
    assert "HOUSE_API_KEY" not in str(describe(house, None))  # the variable's name is not shown either


def test_a_pipeline_other_than_the_default_is_part_of_the_submit_keys() -> None:
    args = {"brief": "b", "corpus": "/c", "destinations": ["site:/x"]}
    omitted, default, pair = (SubmitArgs(**args, pipeline=p) for p in (None, "default", "pair"))
    assert submit_key(omitted) == submit_key(default) != submit_key(pair)
    digests = [
        args_digest(brief="b", corpus="/c", destinations=["site:/x"], actor="u", **extra)
        for extra in ({}, {"pipeline": "default"}, {"pipeline": "pair"})
    ]
    assert digests[0] == digests[1] != digests[2]

"""Pipeline files: what parses, and the one line a bad file gets (file and field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.pipeline import InvalidPipeline, KindInfo, parse_pipeline

KINDS = {
    "researcher": KindInfo("researcher", "evidence"),
    "writer": KindInfo("writer", "version"),
    "reviewer": KindInfo("reviewer", "verdict"),
}

GOOD = """
description = "two reviewers"

[[role]]
name = "research"
kind = "researcher"

[[role]]
name = "draft"
kind = "writer"
after = ["research"]
planner = "house"
budget = { tokens = 40000 }

[[role]]
name = "fact-check"
kind = "reviewer"
after = ["draft"]

[[role]]
name = "style"
kind = "reviewer"
after = ["draft"]
planner = "house"

[model.house]
base_url = "http://127.0.0.1:8000/v1"
model = "some-model"
api_key_env = "HOUSE_API_KEY"
seed = 7
price_in = 0.5
price_out = 1.5

[mcp.archive]
command = ["archive-mcp", "--stdio"]
risk = { search = "read_only" }
"""


def parse(text: str):
    return parse_pipeline("house", text, source="pipelines/house.toml", kinds=KINDS)


def test_a_declared_pipeline_parses_with_its_order_planners_and_budgets() -> None:
    pipeline = parse(GOOD)
    assert [r.name for r in pipeline.roles] == ["research", "draft", "fact-check", "style"]
    draft = pipeline.role("draft")
    assert draft.after == ("research",) and draft.uses_model
    assert draft.budget is not None and draft.budget.tokens == 40000
    assert pipeline.profile(draft) is not None and pipeline.profile(draft).price_out == 1.5  # type: ignore[union-attr]
    assert pipeline.profile(pipeline.role("fact-check")) is None
    assert pipeline.mcp["archive"].risk == {"search": "read_only"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[role]\nname=", "pipelines/house.toml: not TOML"),
        (
            GOOD.replace('kind = "writer"', 'kind = "wrtier"'),
            "pipelines/house.toml: role[1].kind: unknown role kind 'wrtier' (known: researcher, reviewer, writer)",
        ),
        (
            GOOD.replace('after = ["research"]', 'after = ["style"]'),
            "pipelines/house.toml: role[1].after: 'style' is not a role declared before 'draft'",
        ),
        (
            GOOD.replace('planner = "house"\nbudget', 'planner = "other"\nbudget'),
            "pipelines/house.toml: role[1].planner: no [model.other] profile",
        ),
        (
            GOOD.replace('name = "style"', 'name = "fact-check"'),
            "pipelines/house.toml: role[3].name: the role 'fact-check' is declared twice",
        ),
        (
            GOOD.replace("seed = 7", "seed = 7\napi_key = 'sk-x'"),
            "pipelines/house.toml: model.house.api_key: ",
        ),
        (GOOD.replace("budget = { tokens = 40000 }", "budget = { tokens = -1 }"), "role[1].budget.tokens: "),
        (GOOD.replace('name = "draft"', 'name = "Draft!"'), "pipelines/house.toml: role[1].name: "),
        (
            GOOD.replace(
                'planner = "house"\n\n[model', 'planner = "house"\ntools = ["mcp:wiki/search"]\n\n[model'
            ),
            "role[3].tools: 'mcp:wiki/search' names no [mcp.wiki] server",
        ),
        (
            GOOD.replace('[[role]]\nname = "research"\nkind = "researcher"\n', "").replace(
                'after = ["research"]', "after = []"
            ),
            "role[0].after: the writer role 'draft' needs a research role before it",
        ),
        ('[[role]]\nname = "research"\nkind = "researcher"\n', "role: the pipeline has no writer role"),
        ('[mcp.a]\ncommand = ["x"]\nurl = "http://h/mcp"\n[[role]]\nname="r"\nkind="researcher"', "mcp.a: "),
    ],
)
def test_a_bad_pipeline_is_refused_with_one_line_naming_file_and_field(text: str, expected: str) -> None:
    with pytest.raises(InvalidPipeline) as refused:
        parse(text)
    message = str(refused.value)
    assert expected in message, message
    assert "\n" not in message
    assert refused.value.exit_code == 2


def test_the_readmes_pipeline_example_parses() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    pipeline = parse(example)
    assert [(r.name, r.after) for r in pipeline.roles] == [
        ("research", ()),
        ("draft", ("research",)),
        ("fact-check", ("draft",)),
    ]
    assert pipeline.profile(pipeline.role("draft")) is not None

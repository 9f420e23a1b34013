"""The framework comparison on LangGraph (the `compare` extra): every column equal.

Skipped when LangGraph is not installed, unless PRESSROOM_REQUIRE_SERVICES=1
(CI installs the extra), which fails instead.
"""

from __future__ import annotations

import importlib.metadata
import os

import pytest

from evaluation.compare import run_comparison
from tests.support.broken_graph import broken_wiring

pytestmark = pytest.mark.langgraph


@pytest.fixture(scope="module", autouse=True)
def _langgraph() -> None:
    try:
        import langgraph.graph  # noqa: F401
    except ImportError as exc:
        if os.environ.get("PRESSROOM_REQUIRE_SERVICES") == "1":
            pytest.fail(f"langgraph is required (PRESSROOM_REQUIRE_SERVICES=1) but cannot be imported: {exc}")
        pytest.skip(f"langgraph not installed (the `compare` extra): {exc}")


def test_every_column_is_equal_on_langgraph_and_the_pin_is_the_installed_version() -> None:
    report = run_comparison("langgraph")
    assert report["status"] == "measured" and report["all_equal"] is True, report["scenarios"]
    assert report["warnings"] == []
    framework = report["framework"]
    assert framework["version"] == importlib.metadata.version("langgraph")
    assert framework["requirement"] == f"langgraph=={framework['version']}"
    assert framework["in_project_environment"] is True
    for row in report["scenarios"]:
        assert row["equal"] is True and row["framework"] == row["handwritten"], row
    local = run_comparison("local")
    assert report["graph"] == local["graph"]
    assert [r["steps"] for r in report["scenarios"]] == [r["steps"] for r in local["scenarios"]]


def test_langgraph_executing_before_validating_breaks_the_schema_column() -> None:
    report = run_comparison("langgraph", wiring=broken_wiring)
    schema = next(r for r in report["scenarios"] if r["scenario"] == "schema-validation-failure")
    assert schema["equal"] is False and schema["framework"]["side_effects"] > 0

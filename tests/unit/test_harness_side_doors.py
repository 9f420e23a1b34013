"""No side door: entry points reach tools only through `Harness`.

Static half: the Celery task module and the MCP module import no module
that holds an executor and touch no executor-bearing attribute, and they do
call the harness path. The behavioural half (the same proposals through a
local, a task-shaped and an MCP-shaped path give the same decisions) is
`test_harness_faults.test_every_entry_path_gets_the_local_policy_decision`,
and the real Celery task runs in `tests/integration/test_harness_sql.py`.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY_MODULES = {
    "celery tasks": ROOT / "orchestrator" / "celery_app.py",
    "MCP server": ROOT / "orchestrator" / "entrypoints" / "mcp_server.py",
}
# Modules whose objects hold executors or destinations.
EXECUTOR_MODULES = (
    "sagas.publishing",
    "sagas.destinations",
    "sagas.runner",
    "roles.tools",
    "roles.handlers",
    "orchestrator.saga_tools",
    "evaluation.faults",
)
EXECUTOR_ATTRIBUTES = {"executor", "status_probe", "compensation", "recorder", "open_destination", "_invoke"}


def _tree(path: Path) -> ast.Module:
    if not path.exists():
        pytest.skip(f"{path.relative_to(ROOT)} does not exist yet")
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _attributes(tree: ast.Module) -> set[str]:
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


def _calls_on(tree: ast.Module, owner: str, method: str) -> bool:
    """Whether the module calls `<…>.owner.method(…)`, e.g. `app.harness.call(…)`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method:
            target = node.func.value
            if isinstance(target, ast.Attribute | ast.Name) and (
                getattr(target, "attr", None) == owner or getattr(target, "id", None) == owner
            ):
                return True
    return False


def _leaks(tree: ast.Module) -> list[str]:
    return sorted(i for i in _imports(tree) if i.startswith(EXECUTOR_MODULES))


SIDE_DOOR = """
from sagas.publishing import PublishingTools

def run(app, args):
    return app.registry.get("publish").executor(None, args)
"""


def test_the_inspection_catches_a_side_door() -> None:
    tree = ast.parse(SIDE_DOOR)
    assert _leaks(tree) == ["sagas.publishing", "sagas.publishing.PublishingTools"]
    assert _attributes(tree) & EXECUTOR_ATTRIBUTES == {"executor"}
    assert not _calls_on(tree, "harness", "call")
    assert _calls_on(ast.parse("app.harness.call(p, c)"), "harness", "call")


@pytest.mark.parametrize("name", sorted(ENTRY_MODULES))
def test_entry_points_import_nothing_that_holds_an_executor(name: str) -> None:
    leaks = _leaks(_tree(ENTRY_MODULES[name]))
    assert leaks == [], f"the {name} import executor-holding modules: {leaks}"


@pytest.mark.parametrize("name", sorted(ENTRY_MODULES))
def test_entry_points_touch_no_executor_attribute(name: str) -> None:
    touched = _attributes(_tree(ENTRY_MODULES[name])) & EXECUTOR_ATTRIBUTES
    assert touched == set(), f"the {name} reach for {sorted(touched)}"


def test_celery_tasks_hand_every_message_to_app_handle() -> None:
    tree = _tree(ENTRY_MODULES["celery tasks"])
    handle_calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "handle"
    ]
    assert handle_calls, "the task body should call Consumer.handle"


def test_the_mcp_server_calls_tools_only_through_the_harness() -> None:
    tree = _tree(ENTRY_MODULES["MCP server"])
    assert _calls_on(tree, "harness", "call")


def test_app_exposes_tools_only_through_the_registry_the_harness_wraps() -> None:
    from orchestrator.pressroom import Pressroom

    hints = typing.get_type_hints(Pressroom)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(Pressroom)}
    text = {name: str(tp) for name, tp in fields.items()}
    assert [n for n, t in text.items() if "ToolSpec" in t or "Executor" in t] == []
    assert [n for n, t in text.items() if "Registry" in t] == ["registry"]
    assert "Harness" in text["harness"]
    assert "SqlHarnessStore" in text["store"]


def test_app_holds_no_destination_handle() -> None:
    from orchestrator.pressroom import Pressroom

    hints = typing.get_type_hints(Pressroom)
    assert [f.name for f in dataclasses.fields(Pressroom) if "Destination" in str(hints[f.name])] == []

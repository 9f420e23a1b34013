"""The product core does not contain or import the evaluation scaffolding.

Every module under `orchestrator/` (the entry points aside, where the CLI
imports `evaluation` lazily behind `pressroom eval` / `pressroom evidence`),
`sagas/`, `outbox/`, `roles/` and `telemetry/` is read with `ast`, lazy
imports included, and none may import `evaluation`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ("orchestrator", "sagas", "outbox", "roles", "telemetry")
ENTRY_POINTS = ROOT / "orchestrator" / "entrypoints"


def _imported(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _offenders(paths: list[Path], root: Path = ROOT) -> list[str]:
    bad: list[str] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = sorted(n for n in _imported(tree) if n == "evaluation" or n.startswith("evaluation."))
        bad += [f"{path.relative_to(root)}: {n}" for n in names]
    return bad


def _core_modules() -> list[Path]:
    return [
        p
        for package in CORE
        for p in sorted((ROOT / package).rglob("*.py"))
        if not p.is_relative_to(ENTRY_POINTS)
    ]


def test_no_core_module_imports_evaluation() -> None:
    modules = _core_modules()
    assert len(modules) > 50
    assert _offenders(modules) == []


def test_the_scaffolding_is_not_inside_the_core() -> None:
    for name in ("faults.py", "fault_scenarios.py", "memory_store.py"):
        assert not (ROOT / "orchestrator" / "harness" / name).exists()
        assert (ROOT / "evaluation" / name).is_file()
    for name in ("evaluate.py", "eval_measures.py", "eval_report.py", "evidence.py"):
        assert not (ENTRY_POINTS / name).exists()


def test_the_checker_sees_a_lazy_import(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from evaluation.faults import Bench\n    return Bench\n")
    assert _offenders([module], root=tmp_path) == ["lazy.py: evaluation.faults"]

"""The layers, read from the code: every import (lazy and type-only ones included) by `ast`.

Packages (and subpackages) form no cycle, and nothing below the entry points
imports the composition root (`bootstrap`, its `Pressroom`) or an entry point.
The use cases import neither the composition root nor the old assembled `App`
module, which stays gone; the message consumer and dispatcher live in `outbox/`.
The order checked here is the one `docs/architecture.md` draws.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("orchestrator", "sagas", "outbox", "roles", "telemetry", "evaluation")
# Lower layers may not import these, not even lazily or for types.
COMPOSITION = (
    "orchestrator.app",
    "orchestrator.bootstrap",
    "orchestrator.pressroom",
    "orchestrator.celery_app",
    "orchestrator.entrypoints",
)
BELOW_ENTRY_POINTS = (
    "sagas",
    "roles",
    "outbox",
    "telemetry",
    "orchestrator.harness",
    "orchestrator.toolpath",
    "orchestrator.core",
)
# The use-case modules: each class takes what it uses in its constructor, from `bootstrap`.
USE_CASES = (
    "orchestrator.comments",
    "orchestrator.operations",
    "orchestrator.reads.queries",
    "orchestrator.saga_tools",
    "orchestrator.services",
    "orchestrator.submission",
)
# docs/architecture.md, bottom to top: a package may import only packages listed before it.
LAYERS = (
    "orchestrator.core",
    "telemetry",
    "orchestrator.harness",
    "orchestrator.toolpath",
    "orchestrator.store",
    "orchestrator.store.migrations",
    "orchestrator.store.migrations.versions",
    "outbox",
    "sagas.destinations",
    "sagas",
    "roles",
    "orchestrator.reads",
    "orchestrator",
    "evaluation",
    "orchestrator.entrypoints.web",
    "orchestrator.entrypoints",
)


def package_of(module: str) -> str | None:
    """The package (a folder with `__init__.py`) that holds `module`."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        folder = ROOT.joinpath(*parts[:i])
        if (folder / "__init__.py").exists():
            return ".".join(parts[:i])
    return None


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return [m for m in found if m.split(".")[0] in TOP]


def modules() -> list[tuple[str, Path]]:
    out = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            out.append((".".join(path.relative_to(ROOT).with_suffix("").parts), path))
    return out


def package_edges() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the modules that import it."""
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for name, path in modules():
        source = ".".join(path.relative_to(ROOT).parent.parts)
        for target_module in imports(path):
            target = package_of(target_module)
            if target is not None and target != source:
                edges[source][target].add(name)
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {".".join(p.relative_to(ROOT).parent.parts) for _, p in modules()}
    assert packages - set(LAYERS) == set(), "add the new package to LAYERS and docs/architecture.md"


def test_no_package_imports_a_layer_above_it() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [
        f"{source} -> {target} (in {', '.join(sorted(where))})"
        for source, targets in package_edges().items()
        for target, where in targets.items()
        if rank[target] > rank[source]
    ]
    assert upward == []


def test_packages_form_no_cycle() -> None:
    edges = {s: set(t) for s, t in package_edges().items()}
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == path[0]:
                cycles.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                walk(nxt, [*path, nxt])

    for start in sorted(edges):
        walk(start, [start])
    assert cycles == []


@pytest.mark.parametrize("lower", BELOW_ENTRY_POINTS)
def test_nothing_below_the_entry_points_imports_the_composition_root(lower: str) -> None:
    offenders = [
        f"{name} imports {target}"
        for name, path in modules()
        if name == lower or name.startswith(lower + ".")
        for target in imports(path)
        if any(target == c or target.startswith(c + ".") for c in COMPOSITION)
    ]
    assert offenders == []


@pytest.mark.parametrize("use_case", USE_CASES)
def test_use_cases_import_no_composition_root(use_case: str) -> None:
    path = ROOT.joinpath(*use_case.split(".")).with_suffix(".py")
    offenders = [
        target
        for target in imports(path)
        if any(target == c or target.startswith(c + ".") for c in COMPOSITION)
    ]
    assert offenders == [], f"{use_case} imports {offenders}: hand it what it uses instead"


def test_the_assembled_app_module_stays_gone() -> None:
    """Use cases are objects built by `bootstrap`; no module holds them all with the consumer."""
    assert not (ROOT / "orchestrator" / "app.py").exists()


def test_messaging_lives_in_outbox() -> None:
    """The dispatcher and the consumer are `outbox/` objects, and nothing else defines them."""
    defined = sorted(
        (node.name, name)
        for name, path in modules()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name in ("Consumer", "Dispatcher")
    )
    assert defined == [("Consumer", "outbox.consumer"), ("Dispatcher", "outbox.dispatch")]


def test_the_check_sees_a_planted_cycle(tmp_path: Path) -> None:
    """The reader is not blind: an upward import written into a file is found."""
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from orchestrator.app import App\n    return App\n", encoding="utf-8")
    assert "orchestrator.app.App" in imports(planted)
    assert package_of("orchestrator.app.App") == "orchestrator"


# What differs between SQLite and PostgreSQL is the storage adapters' alone: nothing else reads
# the dialect's name or imports a dialect module (migrations, being history, excepted).
DIALECT_PACKAGES = ("orchestrator", "sagas", "outbox", "roles", "telemetry")
STORAGE_ADAPTERS = {
    "orchestrator/store/adapter.py",  # `adapter_for`: picks the adapter by the dialect's name
    "orchestrator/store/sqlite_adapter.py",
    "orchestrator/store/postgres_adapter.py",
}
MIGRATIONS = "orchestrator/store/migrations/"


def dialect_uses(source: str) -> list[str]:
    """The lines of `source` that read `….dialect.name` or import `sqlalchemy.dialects`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "name"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "dialect"
        ):
            found.append(f"{node.lineno}: dialect.name")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy.dialects"):
            found.append(f"{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.ImportFrom) and node.module == "sqlalchemy":
            found += [f"{node.lineno}: sqlalchemy.dialects" for a in node.names if a.name == "dialects"]
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}"
                for a in node.names
                if a.name.startswith("sqlalchemy.dialects")
            ]
    return found


def test_no_dialect_branch_outside_the_storage_adapters() -> None:
    offenders = {}
    for top in DIALECT_PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in STORAGE_ADAPTERS or rel.startswith(MIGRATIONS):
                continue
            found = dialect_uses(path.read_text(encoding="utf-8"))
            if found:
                offenders[rel] = found
    assert offenders == {}


def test_the_dialect_check_sees_a_planted_branch() -> None:
    planted = (
        "from sqlalchemy.dialects.postgresql import insert\n"
        "from sqlalchemy import dialects\n"
        "def f(conn):\n"
        "    if conn.dialect.name == 'postgresql':\n"
        "        return session.get_bind().dialect.name\n"
    )
    assert [w.split(": ", 1)[1] for w in dialect_uses(planted)] == [
        "from sqlalchemy.dialects.postgresql import",
        "sqlalchemy.dialects",
        "dialect.name",
        "dialect.name",
    ]
    assert all((ROOT / rel).is_file() for rel in STORAGE_ADAPTERS)

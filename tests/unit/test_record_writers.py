"""One writer per record: the ledger only through its port's adapters (retention too goes through
`Ledger.prune`), events only through `orchestrator/store/events.py`. Read from the source with
`ast`, for every product module.

A write is: constructing the row class, `insert`/`update`/`delete` on it (or its table, also
under a name of its own: `_LEDGER = LedgerRow.__table__; insert(_LEDGER)`),
assigning an attribute of a value read through it (`row = s.get(LedgerRow, key); row.status = …`,
loops over such values included, and values a function of the module returns built from it),
`setattr` on one, or raw SQL that writes the table.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["orchestrator", "sagas", "roles", "outbox", "telemetry", "evaluation", "bench"]
WRITERS = {
    "LedgerRow": {
        "orchestrator/store/ledger_rows.py",  # the SQL adapter's ledger: every statement that writes it
        "evaluation/memory_store.py",  # the in-memory adapter (its own rows)
        "bench/prune.py",  # seeds synthetic finished sagas in bulk SQL for the prune benchmark
    },
    "EventRow": {
        "orchestrator/store/events.py",
        "bench/prune.py",
        # `pressroom prune`: a finished saga's events past retention go, a snapshot stays.
        "orchestrator/retention.py",
    },
}
TABLES = {"LedgerRow": "ledger", "EventRow": "events"}
WRITE_CALLS = {"insert", "update", "delete"}


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)
        for n in ast.walk(node)
    )


def _bound_names(tree: ast.Module, aliases: set[str]) -> set[str]:
    """Names holding values read through the row class (assigned from it, or looping over it), and
    functions returning such a value of the module's own (`def _targets(): return [(_LEDGER, …)]`)."""
    bound = _bound_by(tree, aliases)
    top = {
        n.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for n in ast.walk(node)
        if isinstance(n, ast.Name)
    }
    module_level = aliases | (bound & top)
    returning = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(
            _mentions(n.value, module_level)
            for n in ast.walk(node)
            if isinstance(n, ast.Return) and n.value is not None
        )
    }
    return _bound_by(tree, aliases | returning) | returning if returning else bound


def _bound_by(tree: ast.AST, aliases: set[str]) -> set[str]:
    bound: set[str] = set()
    # Two passes, so a loop over a list bound later in the text is still seen.
    for _ in range(2):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                if _mentions(node.value, aliases | bound):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.For | ast.comprehension) and _mentions(node.iter, aliases | bound):
                bound |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return bound


def _call_write(node: ast.Call, row_class: str, aliases: set[str], bound: set[str]) -> str | None:
    fn = node.func
    name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
    if name in aliases:
        return f"constructs {row_class}"
    if name in WRITE_CALLS and node.args and _mentions(node.args[0], aliases | bound):
        return f"{name}({row_class})"  # the class, or its table under another name
    if name == "setattr" and node.args and _mentions(node.args[0], bound):
        return f"setattr on a {row_class}"
    return None


def writes(source: str, row_class: str) -> list[str]:
    """The lines of `source` that write rows of `row_class`, each as `line: what`."""
    tree = ast.parse(source)
    aliases = {row_class} | {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for a in node.names
        if a.name == row_class
    }
    bound = _bound_names(tree, aliases)
    sql = re.compile(rf"\b(insert\s+into|update|delete\s+from)\s+\"?{TABLES[row_class]}\b", re.I)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (what := _call_write(node, row_class, aliases, bound)):
            found.append(f"{node.lineno}: {what}")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [
                f"{n.lineno}: sets {n.value.id}.{n.attr} on a {row_class}"
                for t in targets
                for n in ast.walk(t)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in bound
            ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and sql.search(node.value):
            found.append(f"{node.lineno}: SQL writing {TABLES[row_class]}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def product_files() -> list[Path]:
    return sorted(p for top in PRODUCT if (ROOT / top).is_dir() for p in (ROOT / top).rglob("*.py"))


@pytest.mark.parametrize("row_class", sorted(WRITERS))
def test_no_code_outside_its_adapters_writes_the_record(row_class: str) -> None:
    offenders = {}
    for path in product_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel in WRITERS[row_class]:
            continue
        found = writes(path.read_text(encoding="utf-8"), row_class)
        if found:
            offenders[rel] = found
    assert offenders == {}


@pytest.mark.parametrize("row_class", sorted(WRITERS))
def test_the_adapters_themselves_are_seen_writing(row_class: str) -> None:
    """The checker is not blind: the files allowed to write are found writing."""
    present = [ROOT / rel for rel in WRITERS[row_class] if (ROOT / rel).is_file()]
    sql = [p for p in present if "memory" not in p.name]
    assert sql and all(writes(p.read_text(encoding="utf-8"), row_class) for p in sql)


def test_the_ledger_writes_production_used_to_make_are_caught() -> None:
    old_reconcile = """
from orchestrator.store.tables import LedgerRow, utcnow
def reconcile_step(s, key, outcome):
    ledger = s.get(LedgerRow, key, with_for_update=True) if key else None
    if ledger is not None:
        ledger.status = "done" if outcome == "confirmed" else "absent"
        ledger.updated_at = utcnow()
"""
    old_give_up = """
from orchestrator.store import tables as t
def give_up(s, steps):
    for step in steps:
        ledger = s.get(t.LedgerRow, step.idempotency_key)
        if ledger is not None:
            setattr(ledger, "status", "uncertain")
    rows = s.exec(select(t.LedgerRow)).all()
    for row in rows:
        row.attempts += 1
    s.execute(update(t.LedgerRow).values(status="x"))
    s.execute(text("UPDATE ledger SET status = 'done'"))
"""
    assert [w.split(": ", 1)[1] for w in writes(old_reconcile, "LedgerRow")] == [
        "sets ledger.status on a LedgerRow",
        "sets ledger.updated_at on a LedgerRow",
    ]
    assert [w.split(": ", 1)[1] for w in writes(old_give_up, "LedgerRow")] == [
        "setattr on a LedgerRow",
        "sets row.attempts on a LedgerRow",
        "update(LedgerRow)",
        "SQL writing ledger",
    ]
    assert writes("from x import EventRow\ns.add(EventRow(actor='a'))\n", "EventRow") == [
        "2: constructs EventRow"
    ]


def test_a_ledger_delete_through_a_list_of_tables_is_caught() -> None:
    """Retention deleted ledger rows beside the port, from a list of tables a function returns."""
    old_retention = """
from sqlalchemy import delete
from orchestrator.store.tables import EventRow, LedgerRow
_EVENTS = EventRow.__table__
_LEDGER = LedgerRow.__table__
def _targets(ids, cutoff):
    return [
        ("events", _EVENTS, _EVENTS.c.saga_id.in_(ids)),
        ("ledger", _LEDGER, _LEDGER.c.saga_id.in_(ids) & (_LEDGER.c.updated_at < cutoff)),
    ]
def prune(conn, ids, cutoff):
    for name, table, where in _targets(ids, cutoff):
        conn.execute(delete(table).where(where))
"""
    assert [w.split(": ", 1)[1] for w in writes(old_retention, "LedgerRow")] == ["delete(LedgerRow)"]

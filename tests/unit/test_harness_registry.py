"""The registry: one spec per name, and each risk class's contract checked at registration."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from evaluation.faults import ALL_CAPS, Bench, call
from evaluation.memory_store import MemoryHarnessStore
from orchestrator.harness.registry import Registry, RegistryError
from orchestrator.harness.spec import (
    IRREVERSIBLE,
    NO_PROBE,
    ProbeAnswer,
    Risk,
    ToolContext,
    ToolSpec,
    ToolStatus,
)


class Args(BaseModel):
    saga_id: str = "s"


def _run(ctx: ToolContext, args: Any) -> dict[str, Any]:
    return {}


def _probe(ctx: ToolContext, key: str) -> ProbeAnswer:
    return ProbeAnswer(kind="absent")


HIGH_RISK = ToolSpec(
    name="publish",
    description="publish",
    input_model=Args,
    risk=Risk.HIGH_RISK,
    executor=_run,
    key=lambda a: f"k-{a.saga_id}",
    status_probe=_probe,
    compensation=IRREVERSIBLE,
    approval_scope=lambda a: (a.saga_id, "0" * 64, "fake:one"),
)


def test_a_complete_high_risk_spec_registers() -> None:
    registry = Registry([HIGH_RISK])
    assert registry.get("publish") is HIGH_RISK
    assert registry.names() == ["publish"] and len(registry) == 1


def test_declared_sentinels_count_as_declarations() -> None:
    spec = replace(HIGH_RISK, status_probe=NO_PROBE, compensation=IRREVERSIBLE)
    assert Registry([spec]).get("publish") is spec
    assert repr(NO_PROBE) == "NO_PROBE" and repr(IRREVERSIBLE) == "IRREVERSIBLE"


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("key", "business key"),
        ("status_probe", "status probe or NO_PROBE"),
        ("compensation", "compensation or IRREVERSIBLE"),
        ("approval_scope", "what its approval covers"),
        ("executor", "no executor"),
    ],
)
def test_a_high_risk_spec_missing_a_declaration_is_refused(missing: str, message: str) -> None:
    registry = Registry()
    with pytest.raises(RegistryError, match=message):
        registry.register(replace(HIGH_RISK, **{missing: None}))
    assert registry.get("publish") is None


def test_a_reversible_write_must_declare_its_key() -> None:
    spec = ToolSpec(name="note", description="n", input_model=Args, risk=Risk.REVERSIBLE_WRITE, executor=_run)
    with pytest.raises(RegistryError, match="business key"):
        Registry([spec])
    assert Registry([replace(spec, key=lambda a: "k")]).get("note") is not None


def test_a_read_only_tool_needs_only_an_executor() -> None:
    spec = ToolSpec(name="read", description="r", input_model=Args, risk=Risk.READ_ONLY, executor=_run)
    assert Registry([spec]).get("read") is spec
    with pytest.raises(RegistryError, match="no executor"):
        Registry([replace(spec, executor=None)])


def test_duplicate_names_are_refused_and_the_first_spec_stays() -> None:
    registry = Registry([HIGH_RISK])
    other = replace(HIGH_RISK, description="an impostor")
    with pytest.raises(RegistryError, match="already registered"):
        registry.register(other)
    assert registry.get("publish") is HIGH_RISK


def test_a_denied_tool_stays_registered_without_an_executor_and_is_always_refused() -> None:
    b = Bench(MemoryHarnessStore())
    for name in ("shell.run", "approval.grant"):
        spec = b.registry.get(name)
        assert spec is not None and spec.risk is Risk.DENY and spec.executor is None
        # Even a caller holding the tool's own capability is refused, with a reason.
        result = b.harness.call(call(name, {"anything": 1}), b.caller(ALL_CAPS))
        assert result.status is ToolStatus.REJECTED
        assert result.reason == f"tool {name} is denied by policy"
    assert {"shell.run", "approval.grant"} <= set(b.registry.names())


def test_the_application_registers_its_denied_tools() -> None:
    from orchestrator.bootstrap import DENIED_TOOLS, denied_specs

    registry = Registry(denied_specs())
    assert registry.names() == sorted(name for name, _ in DENIED_TOOLS)
    assert all(spec.risk is Risk.DENY and spec.executor is None for spec in registry)
    assert {"approval.grant", "capability.grant"} <= set(registry.names())


def test_specs_publish_their_input_schema() -> None:
    schema = HIGH_RISK.input_schema()
    assert schema["properties"]["saga_id"]["type"] == "string"
    assert HIGH_RISK.output_schema() is None
    assert HIGH_RISK.needed_capability == "publish"
    assert replace(HIGH_RISK, capability="pub").needed_capability == "pub"

"""Declaring tools: one builder per risk class, so the contract is in the signature.

    publish = high_risk("publish", "…", PublishArgs, self._publish,
                        key=publish_key, probe=self._probe, compensation="publish.compensate",
                        approval=lambda a: (a.saga_id, a.version_digest, a.destination))

Each builder's keyword-only arguments are what `registry.register` demands of
that class, so a missing declaration is a type error before it is a
`RegistryError`. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from orchestrator.harness.spec import (
    ApprovalScope,
    Executor,
    KeyFn,
    PreExecute,
    Probe,
    Recorder,
    Risk,
    ToolSpec,
    _Declared,
)


def read_only(
    name: str,
    description: str,
    input_model: type[BaseModel],
    run: Executor,
    *,
    output: type[BaseModel] | None = None,
    capability: str = "",
    annotations: Mapping[str, Any] | None = None,
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        input_model=input_model,
        risk=Risk.READ_ONLY,
        executor=run,
        output_model=output,
        capability=capability,
        annotations=dict(annotations or {}),
    )


def reversible_write(
    name: str,
    description: str,
    input_model: type[BaseModel],
    run: Executor,
    *,
    key: KeyFn,
    output: type[BaseModel] | None = None,
    recorder: Recorder | None = None,
    pre_execute: tuple[PreExecute, ...] = (),
    capability: str = "",
    annotations: Mapping[str, Any] | None = None,
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        input_model=input_model,
        risk=Risk.REVERSIBLE_WRITE,
        executor=run,
        output_model=output,
        key=key,
        capability=capability,
        recorder=recorder,
        pre_execute=pre_execute,
        annotations=dict(annotations or {}),
    )


def high_risk(
    name: str,
    description: str,
    input_model: type[BaseModel],
    run: Executor,
    *,
    key: KeyFn,
    probe: Probe | _Declared,
    compensation: str | _Declared,
    approval: ApprovalScope,
    output: type[BaseModel] | None = None,
    recorder: Recorder | None = None,
    pre_execute: tuple[PreExecute, ...] = (),
    capability: str = "",
    annotations: Mapping[str, Any] | None = None,
) -> ToolSpec:
    """`probe`: the status query (or `NO_PROBE`); `compensation`: the name of the tool
    that undoes this one, called through the harness like any tool (or `IRREVERSIBLE`)."""
    return ToolSpec(
        name=name,
        description=description,
        input_model=input_model,
        risk=Risk.HIGH_RISK,
        executor=run,
        output_model=output,
        key=key,
        status_probe=probe,
        compensation=compensation,
        capability=capability,
        approval_scope=approval,
        recorder=recorder,
        pre_execute=pre_execute,
        annotations=dict(annotations or {}),
    )


def denied(name: str, description: str, input_model: type[BaseModel]) -> ToolSpec:
    """Registered so that it is known, and always refused."""
    return ToolSpec(
        name=name, description=description, input_model=input_model, risk=Risk.DENY, executor=None
    )


__all__ = ["denied", "high_risk", "read_only", "reversible_write"]

"""The `Executor` port at the bottom of the path, and its adapter over tool specs.

`run` calls the tool and says what happened as an `Attempt` value (never
raises for a tool's own failure): `applied`, `failed` (definitely not
applied), `refused` (the executor said no, nothing happened) or `maybe`
(the effect may exist: a timeout, or a high-risk executor's bug after the
intent). `probe` asks the tool's status query about the call's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from orchestrator.core.errors import DestinationError, PressroomError, Refused
from orchestrator.harness.spec import NO_PROBE, ProbeAnswer, Risk
from orchestrator.toolpath.call import Call


@dataclass(frozen=True)
class Attempt:
    outcome: Literal["applied", "failed", "refused", "maybe"]
    output: Any = None
    reason: str | None = None
    error: BaseException | None = None


class Executor(Protocol):
    """The one port every wrapper wraps: run a validated, authorized call; ask its status."""

    def run(self, call: Call) -> Attempt: ...

    def probe(self, call: Call) -> ProbeAnswer: ...


class SpecExecutor:
    """Runs the spec's executor and status probe; the only code that touches them."""

    def run(self, call: Call) -> Attempt:
        spec = call.spec
        assert spec.executor is not None  # the registry guarantees it
        try:
            output = spec.executor(call.context(), call.model)
        except Refused as exc:  # the executor said no: nothing happened
            return Attempt("refused", reason=str(exc), error=exc)
        except Exception as exc:
            return _classify(call, exc)
        if isinstance(output, BaseModel):
            output = output.model_dump(mode="json")
        return Attempt("applied", output=output)

    def probe(self, call: Call) -> ProbeAnswer:
        probe = call.spec.status_probe
        if probe is None or probe is NO_PROBE or not callable(probe) or call.key is None:
            return ProbeAnswer(kind="unknown", detail="the tool has no status query")
        try:
            return probe(call.context(), call.key)
        except Exception as exc:
            return ProbeAnswer(kind="unknown", detail=f"status query failed: {exc}")


def _classify(call: Call, exc: Exception) -> Attempt:
    reason = str(exc) if isinstance(exc, PressroomError) else f"{type(exc).__name__}: {exc}"
    if call.spec.risk is Risk.READ_ONLY:
        return Attempt("failed", reason=reason, error=exc)  # a read failed: definitely nothing applied
    if isinstance(exc, DestinationError):
        return Attempt("failed" if exc.definite else "maybe", reason=reason, error=exc)
    if isinstance(exc, PressroomError):
        return Attempt("failed", reason=reason, error=exc)
    # An executor bug after the intent: a high-risk effect may exist.
    return Attempt("maybe" if call.spec.risk is Risk.HIGH_RISK else "failed", reason=reason, error=exc)


__all__ = ["Attempt", "Executor", "SpecExecutor"]

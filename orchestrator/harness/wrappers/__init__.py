"""The tool path as composed wrappers around one `Executor` port.

``Validate → Authorize → Ledger → Trace → Executor``, each its own module and
tested alone with a fake next step; `build_path` composes them (the engine's
`Harness` is the public entry). `Answers` records whatever a wrapper ends a
call with.
"""

from orchestrator.harness.wrappers.answers import Answers
from orchestrator.harness.wrappers.authorize import Authorize
from orchestrator.harness.wrappers.build import build_path
from orchestrator.harness.wrappers.call import Call, Caller, Phases, Step, Usage
from orchestrator.harness.wrappers.execute import Attempt, Executor, SpecExecutor
from orchestrator.harness.wrappers.ledger import Ledger
from orchestrator.harness.wrappers.trace import Trace
from orchestrator.harness.wrappers.validate import Validate

__all__ = [
    "Answers",
    "Attempt",
    "Authorize",
    "Call",
    "Caller",
    "Executor",
    "Ledger",
    "Phases",
    "SpecExecutor",
    "Step",
    "Trace",
    "Usage",
    "Validate",
    "build_path",
]

"""The tool path as composed wrappers around one `Executor` port.

``Validate → Authorize → Ledger → Trace → Executor``, each its own module and
tested alone with a fake next step; `build_path` composes them (the engine's
`Harness` is the public entry). `Answers` records whatever a wrapper ends a
call with.
"""

from orchestrator.toolpath.answers import Answers
from orchestrator.toolpath.authorize import Authorize
from orchestrator.toolpath.build import build_path
from orchestrator.toolpath.call import Call, Caller, Phases, Step, Usage
from orchestrator.toolpath.execute import Attempt, Executor, SpecExecutor
from orchestrator.toolpath.ledger import Ledger
from orchestrator.toolpath.trace import Trace
from orchestrator.toolpath.validate import Validate

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

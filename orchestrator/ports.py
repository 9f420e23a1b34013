"""What the use cases are built from, besides the stores: the callables `bootstrap` hands them.

- `Transact`: opens one unit of work (`store.db.unit_of_work` over the engine).
- `Sessions`: opens a read session.
- `Drain`: delivers queued work in this process after a commit (inline://);
  with a real broker it does nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.store.db import Sessions
from outbox.handlers import Dispatch, Transact

Drain = Callable[[], int]

__all__ = ["Dispatch", "Drain", "Sessions", "Transact"]

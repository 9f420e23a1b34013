"""The orchestrator's default settings that the suite times itself by.

The run leaves these unset, so its processes run on the defaults; the suite
reads the same defaults from `orchestrator.core.config.Settings` instead of
copying the numbers.
"""

from __future__ import annotations

from orchestrator.core.config import Settings


def _default(name: str) -> float:
    value = Settings.model_fields[name].default
    assert isinstance(value, int | float), name
    return float(value)


DESTINATION_TIMEOUT = _default("destination_timeout")
LEASE_SECONDS = _default("lease_seconds")

# After the faults stop, a saga whose work a fault lost is sent again when its lease runs
# out, and may need a second lease after a second loss: four leases to settle.
SETTLE_SECONDS = 4 * LEASE_SECONDS
# A webhook that applies and then hangs must hold its answer past the caller's timeout.
STALL_SECONDS = DESTINATION_TIMEOUT + 4.0

__all__ = ["DESTINATION_TIMEOUT", "LEASE_SECONDS", "SETTLE_SECONDS", "STALL_SECONDS"]

"""Acknowledging a version's review findings before approving it. Pure: no I/O.

A finding is named by `finding_id`: a short digest of its rule, location and
message, so the id a reviewer ticked on the page names the same finding when
the approval is recorded, and a finding that is not on the version approved
never matches. `unacknowledged(findings, ticked)` lists the findings a
reviewer has not ticked; `acknowledged(findings)` is what the approval event
records (id, rule, location) once every one is ticked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def finding_id(finding: Mapping[str, Any]) -> str:
    """A stable short name for one finding (the same text gives the same id)."""
    canonical = json.dumps(
        [str(finding.get(k) or "") for k in ("rule", "location", "message")], separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def unacknowledged(findings: Sequence[Mapping[str, Any]], ticked: Iterable[str]) -> list[Mapping[str, Any]]:
    """The findings whose id is not among `ticked`, in the review's order."""
    seen = set(ticked)
    return [f for f in findings if finding_id(f) not in seen]


def acknowledged(findings: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The record of acknowledged findings an approval event carries."""
    return [
        {"id": finding_id(f), "rule": str(f.get("rule") or ""), "location": str(f.get("location") or "")}
        for f in findings
    ]


__all__ = ["acknowledged", "finding_id", "unacknowledged"]

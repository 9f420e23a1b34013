"""The fault-injection rigs and fixtures tests share, from the `evaluation` package.

Tests import them from here, never from an entry point: the rigs (an
in-memory harness store, the fault bench, the SQL store with seeding) and the
malformed-proposal generator live in `evaluation/`, outside the product core.
"""

from __future__ import annotations

from evaluation.evidence import MALFORMED, SAMPLE_CORPUS, SqlRig, malformed_proposals, publish_flow

__all__ = ["MALFORMED", "SAMPLE_CORPUS", "SqlRig", "malformed_proposals", "publish_flow"]

"""Canonical JSON and the digests built on it. No I/O."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same value always gives the same bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_digest(text: str) -> str:
    """The content address of a version: sha256 of its markdown bytes."""
    return sha256_hex(text.encode("utf-8"))


def markdown_title(markdown: str) -> str | None:
    """The text of the markdown's first `# ` heading line, stripped; None without one."""
    for line in markdown.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def version_digest(title: str, markdown: str) -> str:
    """The digest of what a version publishes: its title and its markdown.

    When the title is the markdown's own first `# ` heading, the markdown's bytes hold
    it, and the digest is `text_digest(markdown)` (every drafted version). Otherwise the
    title is published beside the markdown, so the digest is sha256 over the canonical
    JSON `[title, markdown]`. The two forms cannot meet: canonical JSON is one line that
    starts with `[`, which has no `# ` heading. Either way a title changed after approval
    no longer gives the approved digest.
    """
    if markdown_title(markdown) == title:
        return text_digest(markdown)
    return sha256_hex(canonical_json([title, markdown]))


def args_digest(arguments: Any) -> str:
    return sha256_hex(canonical_json(arguments))


def business_key(saga_id: str, destination: str, version_digest: str) -> str:
    """The idempotency key of one publish: (saga, destination, version digest).

    Distinct from the tool-call id and any request id: a retry, a redelivery
    or a second caller computes the same key for the same business action.
    """
    return "pub-" + sha256_hex(canonical_json([saga_id, destination, version_digest]))[:40]


__all__ = [
    "args_digest",
    "business_key",
    "canonical_json",
    "markdown_title",
    "sha256_hex",
    "text_digest",
    "version_digest",
]

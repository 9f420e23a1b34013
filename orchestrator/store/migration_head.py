"""The head of the shipped migrations, read from the revision files without Alembic.

Every process checks on first use that its database is at the head revision;
importing Alembic for that costs a short command about a tenth of a second
of CPU. The revision files are read as text instead: each names its
`revision` and `down_revision`; the head is the one revision no other names.
When the files are not one plain chain (a merge, a form this reader does not
know) the answer is None, and the caller asks Alembic.
`tests/unit/test_migration_head.py` checks the answer against Alembic's.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

VERSIONS = Path(__file__).resolve().parent / "migrations" / "versions"
_REVISION = re.compile(r"^revision(?:\s*:[^=]*)?\s*=\s*[\"'](\w+)[\"']", re.MULTILINE)
_DOWN = re.compile(r"^down_revision(?:\s*:[^=]*)?\s*=\s*(None|[\"'](\w+)[\"'])\s*$", re.MULTILINE)


def head_from_files(folder: Path = VERSIONS) -> str | None:
    """The head of the migration chain in `folder`, or None when it is not one plain chain."""
    revisions: dict[str, str | None] = {}
    for file in folder.glob("*.py"):
        text = file.read_text(encoding="utf-8")
        rev, down = _REVISION.search(text), _DOWN.search(text)
        if rev is None:
            continue
        if down is None:
            return None  # a merge (a tuple of parents) or a form this reader does not know
        revisions[rev.group(1)] = down.group(2)
    heads = set(revisions) - {d for d in revisions.values() if d}
    return heads.pop() if len(heads) == 1 else None


@cache
def shipped_head() -> str | None:
    """`head_from_files()` of the shipped migrations, read once per process."""
    return head_from_files()


__all__ = ["VERSIONS", "head_from_files", "shipped_head"]

"""Safe names for destination files: slugs, idempotency keys, contained paths.

Owns the rules that keep a title or a key from naming a file outside a
destination's folder. `slugify` and `check_key` are pure; `contained_path`
resolves paths (it reads symlinks) and refuses any that leave their folder.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

from orchestrator.core.errors import InvalidInput

SLUG_MAX_LENGTH = 64
KEY_MAX_LENGTH = 200  # leaves room for suffixes such as ".json" under the 255-byte name limit

_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_KEY = re.compile(r"[A-Za-z0-9._:-]+")


def slugify(title: str, *, max_length: int = SLUG_MAX_LENGTH) -> str:
    """A file-name-safe slug for `title`: `[a-z0-9-]`, at most `max_length`, never empty.

    Accents fold to ASCII; every other run of characters becomes one dash.
    A title with nothing left (say, only CJK script) gets `page-<hash>`, so
    two such titles do not share a file. Slugs are fixed points:
    `slugify(slugify(t)) == slugify(t)`.
    """
    if max_length < 16:
        raise ValueError("max_length must leave room for the page-<hash> fallback")
    folded = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_SLUG.sub("-", folded.lower()).strip("-")
    slug = slug[:max_length].rstrip("-")
    if not slug:
        slug = "page-" + hashlib.sha256(title.encode("utf-8")).hexdigest()[:10]
    return slug


def check_key(key: str) -> str:
    """Return `key` if it is a usable idempotency key, else raise `InvalidInput`.

    A key is `[A-Za-z0-9._:-]+`, at most 200 characters, and not `.` or `..`:
    destinations use it as a file name, a commit trailer and an HTTP header.
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key) or key in {".", ".."}:
        raise InvalidInput(f"invalid idempotency key {key!r}: use letters, digits and . _ : - only", key=key)
    if len(key) > KEY_MAX_LENGTH:
        raise InvalidInput(f"idempotency key longer than {KEY_MAX_LENGTH} characters", key=key)
    return key


def contained_path(folder: Path, *parts: str) -> Path:
    """`folder/parts...`, resolved, or `InvalidInput` if it would land outside `folder`."""
    root = folder.resolve()
    candidate = root.joinpath(*parts).resolve()
    if candidate == root or not candidate.is_relative_to(root):
        raise InvalidInput(
            f"path {'/'.join(parts)!r} escapes the destination folder {str(root)!r}",
            folder=str(root),
        )
    return candidate


__all__ = ["KEY_MAX_LENGTH", "SLUG_MAX_LENGTH", "check_key", "contained_path", "slugify"]

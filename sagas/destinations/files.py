"""Careful file writes for the file-backed destinations (`site:`, `git:`).

Owns three small things and nothing else: an atomic write (temp file in the
same folder, fsync, `os.replace`, fsync of the folder), a removal that is
also made durable, and an exclusive advisory lock on a file (`fcntl.flock`),
which serialises publishers across threads and processes on one machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


# Read once at import: os.umask() is process-wide, so reading it later could
# race with another thread creating a file.
_UMASK = _read_umask()
# The mode a plain `open()` gives a new file: published pages are meant to be served.
PUBLIC_FILE_MODE = 0o666 & ~_UMASK


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that readers see the old bytes or the new, never a mix.

    The file gets the mode a plain `open()` would give it (0666 less the umask):
    published pages are meant to be served, not hidden like a temp file.
    """
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, PUBLIC_FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_folder(path.parent)


def atomic_write_json(path: Path, value: dict[str, Any]) -> None:
    atomic_write(path, (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object stored at `path`, or None when there is no file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return value


def durable_unlink(path: Path) -> None:
    """Remove `path` if present, and make the removal survive a crash."""
    try:
        path.unlink()
    except FileNotFoundError:
        return
    _fsync_folder(path.parent)


@contextlib.contextmanager
def exclusive_lock(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `lock_file` (created if missing) for the block."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


__all__ = [
    "PUBLIC_FILE_MODE",
    "atomic_write",
    "atomic_write_json",
    "durable_unlink",
    "exclusive_lock",
    "read_json",
]

"""Walking a corpus for a refresh, and deciding which files it must look at.

`walk()` lists every folder under the corpus root (dot folders and symlinked
folders left out) and stats every entry that is not a folder: that stat is
the floor of a refresh, since a file changed in place changes its own
mtime and ctime but not its folder's. Everything else here is there to do
as little as possible beyond it.

A folder's listing (each entry's name, size, mtime, ctime and inode, in the
order the file system lists them) is packed into bytes. The index keeps the
packed listing each folder had at the end of the last refresh, and forgets
it (``NULL``) whenever one of the folder's files is written outside a
refresh. `plan()` compares the two: a folder whose listing is byte for byte
the recorded one holds exactly the files, with exactly the signatures, that
the index holds for it, so none of its files is looked at one by one.
Any other folder is compared file by file with the recorded signatures, as
every folder was before. A folder's listing changes with any file added,
removed, renamed, rewritten or touched in it, so no change is missed; a
listing that changes for another reason (another file in the folder, a new
listing order) only costs the file-by-file comparison.

`plan()` does no I/O of its own: the recorded signatures come through the
callable it is given.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from roles.corpus import SUFFIXES

Signature = tuple[int, int, int, int]
# name, size, mtime_ns, ctime_ns, inode; size -1 when the stat failed.
Entry = tuple[str, int, int, int, int]
UNKNOWN: Final = -1


@dataclass(frozen=True)
class Folder:
    path: str
    entries: list[Entry]


@dataclass(frozen=True)
class Check:
    """A candidate file the refresh must look at: not as recorded, or not recorded."""

    rel: str
    path: str
    signature: Signature | None
    known: bool


@dataclass
class Plan:
    unchanged: int = 0
    check: list[Check] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    # prefix -> (packed listing, or None when it must not be trusted; candidate files)
    rows: dict[str, tuple[bytes | None, int]] = field(default_factory=dict)
    candidates: int = 0


def walk(base: Path) -> dict[str, Folder]:
    """Every folder under `base` by its corpus-relative prefix ("" for the root, "a/b/" below),
    with its entries that are not folders. `os.scandir` and plain strings: at 100,000 files
    the walk is most of a refresh."""
    folders: dict[str, Folder] = {}
    pending = [(str(base), "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        found: list[Entry] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not entry.is_symlink() and not entry.name.startswith("."):
                    pending.append((entry.path, prefix + entry.name + "/"))
                continue
            try:
                st = entry.stat()
            except OSError:
                found.append((entry.name, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN))
                continue
            found.append((entry.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
        folders[prefix] = Folder(folder, found)
    return folders


def is_candidate(name: str) -> bool:
    """A corpus source: ``.md`` or ``.txt``, its name not starting with a dot."""
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in SUFFIXES


def candidates(prefix: str, folder: Folder) -> list[tuple[str, str, Signature | None]]:
    """The folder's candidate files as (corpus-relative path, path, signature or None)."""
    return [
        (
            prefix + name,
            os.path.join(folder.path, name),
            None if size == UNKNOWN else (size, mtime, ctime, ino),
        )
        for name, size, mtime, ctime, ino in folder.entries
        if is_candidate(name)
    ]


def pack(entries: list[Entry]) -> bytes:
    return marshal.dumps(entries)


def plan(
    folders: Mapping[str, Folder],
    recorded: Mapping[str, tuple[bytes | None, int]],
    signatures_in: Callable[[str], dict[str, Signature | None]],
) -> Plan:
    """What a refresh must do, given the walk and each folder's recorded (listing, candidates)."""
    out = Plan()
    left = dict(recorded)
    for prefix, folder in folders.items():
        packed = pack(folder.entries)
        before = left.pop(prefix, None)
        if before is not None and before[0] is not None and before[0] == packed:
            out.unchanged += before[1]
            out.candidates += before[1]
            out.rows[prefix] = before
            continue
        known = signatures_in(prefix)
        files = candidates(prefix, folder)
        for rel, path, signature in files:
            was_known = rel in known
            stored = known.pop(rel, None)
            if was_known and signature is not None and stored == signature:
                out.unchanged += 1
                continue
            out.check.append(Check(rel, path, signature, was_known))
        out.gone.extend(known)
        out.candidates += len(files)
        if files:
            out.rows[prefix] = (packed, len(files))
    for prefix in left:
        out.gone.extend(signatures_in(prefix))
    out.check.sort(key=lambda c: c.rel)
    out.gone.sort()
    return out


def every_candidate(folders: Mapping[str, Folder]) -> list[tuple[str, str, Signature | None]]:
    """Every candidate file of the walk, in corpus-path order."""
    found = [item for prefix, folder in folders.items() for item in candidates(prefix, folder)]
    found.sort(key=lambda item: item[0])
    return found


__all__ = [
    "Check",
    "Entry",
    "Folder",
    "Plan",
    "Signature",
    "candidates",
    "every_candidate",
    "pack",
    "plan",
    "walk",
]

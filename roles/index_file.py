"""The corpus index's record: one SQLite file per corpus.

This module owns the SQL. A corpus's index file holds:

- ``meta``: the analyzer the rows were built with (tokenizer, passage size,
  injection rules) and when the last walk started;
- ``files``: one row per candidate file: its corpus-relative path and folder, the stat
  signature it had when it was read (size, mtime, ctime, inode), its sha256
  digest or why it was skipped, and whether a passage taints it (the text is
  in ``texts``, so that a refresh's scan of ``files`` stays small);
- ``passages``: every passage (offsets, text, the brief-independent
  injection reasons and the URLs it carries, ``flagged`` when either is set
  or its file is tainted). Ids are never reused (``AUTOINCREMENT``): the search
  engine (`roles.index_search`) names passages by id, and a passage read again
  gets a new one;
- ``folders``: per folder holding candidate files, the packed listing it had
  at the end of the last refresh (see `roles.index_walk`) and its number of
  candidate files; every write to a file outside a refresh sets the listing
  to ``NULL``, so that the next refresh compares that folder file by file.

The passages that are not flagged are searched in the engine, which is built
from these rows. Passages of one file are replaced together, in the refresh's
transaction. The file runs in WAL mode so that many workers read while one
refreshes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from roles.artifacts import Passage

BUSY_MS: Final = 60_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY,
    folder TEXT NOT NULL,
    size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, inode INTEGER,
    digest TEXT, skipped TEXT,
    tainted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS files_skipped ON files(skipped);
CREATE INDEX IF NOT EXISTS files_folder ON files(folder);
CREATE TABLE IF NOT EXISTS folders(path TEXT PRIMARY KEY, listing BLOB, candidates INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS files_skipped_paths ON files(path, skipped) WHERE skipped IS NOT NULL;
CREATE TABLE IF NOT EXISTS texts(path TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS passages(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    text TEXT NOT NULL,
    reasons TEXT NOT NULL,
    urls TEXT NOT NULL,
    flagged INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_path ON passages(path, start);
CREATE INDEX IF NOT EXISTS passages_flagged ON passages(flagged, path, start) WHERE flagged = 1;
"""

Signature = tuple[int, int, int, int]


@dataclass(frozen=True)
class StoredFile:
    """What the index knows of one file (text left out: it is read only when needed)."""

    path: str
    signature: Signature | None
    digest: str | None
    skipped: str | None


@dataclass(frozen=True)
class StoredPassage:
    """One passage row with its file's digest and taint."""

    passage: Passage
    reasons: tuple[str, ...]
    urls: tuple[str, ...]
    tainted: bool


@dataclass(frozen=True)
class NewPassage:
    """A passage to store, with its brief-independent assessment."""

    start: int
    end: int
    text: str
    reasons: tuple[str, ...]
    urls: tuple[str, ...]


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating) an index file: WAL, a generous busy timeout, the schema in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    with writing(db):
        columns = {row[1] for row in db.execute("PRAGMA table_info(files)")}
        if columns and "folder" not in columns:
            # A file of an older layout (the FTS5 index): its analyzer differs too, so the
            # next refresh reads every file again; its tables go now, before the schema.
            for table in ("plain", "passages", "texts", "files", "folders"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
    return db


class Connections:
    """Index files kept open, per thread and per process: a file's connection,
    pragmas and schema check are paid once, not on every read.

    A file removed or replaced since it was opened (another inode) is opened
    again; a call that fails closes its connection, so the next one starts
    afresh; a forked child opens its own. At most `keep` files stay open per
    thread, the least recently used closing first.
    """

    def __init__(self, keep: int = 16) -> None:
        self.keep = keep
        self._local = threading.local()

    def _held(self) -> OrderedDict[Path, tuple[tuple[int, int], sqlite3.Connection]]:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            local.pid, local.held = os.getpid(), OrderedDict()
        held: OrderedDict[Path, tuple[tuple[int, int], sqlite3.Connection]] = local.held
        return held

    @contextmanager
    def opened(self, path: Path) -> Iterator[sqlite3.Connection]:
        held = self._held()
        kept = held.pop(path, None)
        identity = _identity(path)
        if kept is not None and kept[0] != identity:
            kept[1].close()
            kept = None
        db = kept[1] if kept is not None else connect(path)
        try:
            yield db
        except BaseException:
            db.close()
            raise
        if db.in_transaction:
            db.rollback()
        # A file opened now may have been created by this connection: its identity is read after.
        held[path] = (identity if kept is not None else _identity(path), db)
        while len(held) > self.keep:
            held.popitem(last=False)[1][1].close()


def _identity(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)


@contextmanager
def writing(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once so concurrent refreshes queue up."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def get_meta(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
    db.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def clear(db: sqlite3.Connection) -> None:
    """Forget every file (the analyzer changed): the tables are made anew and the
    refresh reads every file again. (``plain`` is the FTS5 table of older files.)"""
    for table in ("plain", "passages", "texts", "files", "folders"):
        db.execute(f"DROP TABLE IF EXISTS {table}")
    for statement in _SCHEMA.split(";"):
        if statement.strip() and "meta(" not in statement:
            db.execute(statement)


def stored_files(db: sqlite3.Connection) -> dict[str, StoredFile]:
    rows = db.execute("SELECT path, size, mtime_ns, ctime_ns, inode, digest, skipped FROM files")
    out: dict[str, StoredFile] = {}
    for path, size, mtime, ctime, inode, digest, skipped in rows:
        signature = None if size is None else (int(size), int(mtime), int(ctime), int(inode))
        out[str(path)] = StoredFile(str(path), signature, digest, skipped)
    return out


def stored_signatures(db: sqlite3.Connection, folder: str | None = None) -> dict[str, Signature | None]:
    """The recorded stat signatures, by path: of every file, or of the files directly in `folder`."""
    if folder is None:
        rows = db.execute("SELECT path, size, mtime_ns, ctime_ns, inode FROM files")
    else:
        rows = db.execute(
            "SELECT path, size, mtime_ns, ctime_ns, inode FROM files WHERE folder = ?", (folder,)
        )
    return {
        str(path): None if size is None else (int(size), int(mtime), int(ctime), int(inode))
        for path, size, mtime, ctime, inode in rows
    }


def stored_file(db: sqlite3.Connection, path: str) -> tuple[StoredFile, str | None] | None:
    """One file's row and its text, or None when the index has no such file."""
    row = db.execute(
        "SELECT f.size, f.mtime_ns, f.ctime_ns, f.inode, f.digest, f.skipped, t.text "
        "FROM files f LEFT JOIN texts t ON t.path = f.path WHERE f.path = ?",
        (path,),
    ).fetchone()
    if row is None:
        return None
    size, mtime, ctime, inode, digest, skipped, text = row
    signature = None if size is None else (int(size), int(mtime), int(ctime), int(inode))
    return StoredFile(path, signature, digest, skipped), text


def folder_of(path: str) -> str:
    """A corpus-relative path's folder prefix: "" at the root, "a/b/" below."""
    return path[: path.rfind("/") + 1]


def _forget_listing(db: sqlite3.Connection, path: str) -> None:
    db.execute(
        "INSERT INTO folders(path, listing, candidates) VALUES (?, NULL, 0) "
        "ON CONFLICT(path) DO UPDATE SET listing = NULL",
        (folder_of(path),),
    )


def folder_rows(db: sqlite3.Connection) -> dict[str, tuple[bytes | None, int]]:
    """Every folder's recorded (packed listing or None, candidate files)."""
    rows = db.execute("SELECT path, listing, candidates FROM folders")
    return {str(path): (None if listing is None else bytes(listing), int(n)) for path, listing, n in rows}


def set_folder_rows(
    db: sqlite3.Connection,
    rows: dict[str, tuple[bytes | None, int]],
    recorded: dict[str, tuple[bytes | None, int]],
) -> None:
    """Record the folders as a refresh left them: `rows`, and no others. `recorded` is what the
    refresh found: only rows that differ are written. (A folder whose files the refresh wrote
    differs: it was read file by file, so its recorded listing was not its listing now.)"""
    db.executemany("DELETE FROM folders WHERE path = ?", [(path,) for path in recorded if path not in rows])
    db.executemany(
        "INSERT INTO folders(path, listing, candidates) VALUES (?, ?, ?) "
        "ON CONFLICT(path) DO UPDATE SET listing = excluded.listing, candidates = excluded.candidates",
        [(path, listing, n) for path, (listing, n) in rows.items() if recorded.get(path) != (listing, n)],
    )


def set_signature(db: sqlite3.Connection, path: str, signature: Signature | None) -> None:
    _forget_listing(db, path)
    size, mtime, ctime, inode = signature if signature is not None else (None, None, None, None)
    db.execute(
        "UPDATE files SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ? WHERE path = ?",
        (size, mtime, ctime, inode, path),
    )


def remove_file(db: sqlite3.Connection, path: str) -> None:
    """Drop a file and its passages."""
    _forget_listing(db, path)
    db.execute("DELETE FROM passages WHERE path = ?", (path,))
    db.execute("DELETE FROM texts WHERE path = ?", (path,))
    db.execute("DELETE FROM files WHERE path = ?", (path,))


def put_skipped(db: sqlite3.Connection, path: str, signature: Signature | None, reason: str) -> None:
    remove_file(db, path)
    size, mtime, ctime, inode = signature if signature is not None else (None, None, None, None)
    db.execute(
        "INSERT INTO files(path, folder, size, mtime_ns, ctime_ns, inode, skipped) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (path, folder_of(path), size, mtime, ctime, inode, reason),
    )


def put_file(
    db: sqlite3.Connection,
    path: str,
    signature: Signature | None,
    digest: str,
    text: str,
    passages: Iterable[NewPassage],
    tainted: bool,
) -> list[tuple[int, str, str]]:
    """Store one read file and replace its passages; returns its clean passages (id, path, text)."""
    remove_file(db, path)
    size, mtime, ctime, inode = signature if signature is not None else (None, None, None, None)
    db.execute(
        "INSERT INTO files(path, folder, size, mtime_ns, ctime_ns, inode, digest, tainted) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (path, folder_of(path), size, mtime, ctime, inode, digest, int(tainted)),
    )
    db.execute("INSERT INTO texts(path, text) VALUES (?, ?)", (path, text))
    clean: list[tuple[int, str, str]] = []
    for p in passages:
        flagged = bool(tainted or p.reasons or p.urls)
        cursor = db.execute(
            'INSERT INTO passages(path, start, "end", text, reasons, urls, flagged) VALUES (?, ?, ?, ?, ?, ?, ?)',
            (path, p.start, p.end, p.text, json.dumps(p.reasons), json.dumps(p.urls), int(flagged)),
        )
        if not flagged:
            assert cursor.lastrowid is not None
            clean.append((cursor.lastrowid, path, p.text))
    return clean


def flagged_passages(db: sqlite3.Connection) -> list[StoredPassage]:
    """Every flagged passage, in corpus order (path, then offset)."""
    rows = db.execute(
        'SELECT p.path, p.start, p."end", p.text, p.reasons, p.urls, f.digest, f.tainted '
        "FROM passages p JOIN files f ON f.path = p.path WHERE p.flagged = 1 ORDER BY p.path, p.start"
    )
    return [
        StoredPassage(
            Passage(source=path, source_digest=digest, start=start, end=end, text=text),
            tuple(json.loads(reasons)),
            tuple(json.loads(urls)),
            bool(tainted),
        )
        for path, start, end, text, reasons, urls, digest, tainted in rows
    ]


def plain_passages(db: sqlite3.Connection) -> list[Passage]:
    """Every passage that is not flagged, in corpus order."""
    rows = db.execute(
        'SELECT p.path, p.start, p."end", p.text, f.digest FROM passages p JOIN files f ON f.path = p.path '
        "WHERE p.flagged = 0 ORDER BY p.path, p.start"
    )
    return [
        Passage(source=path, source_digest=digest, start=start, end=end, text=text)
        for path, start, end, text, digest in rows
    ]


def clean_rows(db: sqlite3.Connection) -> Iterator[tuple[int, str, str]]:
    """Every passage that is not flagged as (id, path, text), in id order: what the engine holds."""
    for passage_id, path, text in db.execute(
        "SELECT id, path, text FROM passages WHERE flagged = 0 ORDER BY id"
    ):
        yield int(passage_id), str(path), str(text)


def passages_by_id(db: sqlite3.Connection, ids: Iterable[int]) -> dict[int, Passage]:
    """The passages with these ids (those that exist), with their file's digest."""
    wanted = [int(i) for i in ids]
    if not wanted:
        return {}
    marks = ",".join("?" * len(wanted))
    rows = db.execute(
        f'SELECT p.id, p.path, p.start, p."end", p.text, f.digest FROM passages p '
        f"JOIN files f ON f.path = p.path WHERE p.id IN ({marks}) AND p.flagged = 0",
        wanted,
    )
    return {
        int(pid): Passage(source=path, source_digest=digest, start=start, end=end, text=text)
        for pid, path, start, end, text, digest in rows
    }


def count_read(db: sqlite3.Connection) -> None:
    """Record in ``meta`` how many files were read into the index (every write ends with it:
    counting 100,000 rows on every answer would cost more than the answer's search)."""
    (count,) = db.execute("SELECT count(*) FROM files WHERE skipped IS NULL").fetchone()
    set_meta(db, "files_read", str(int(count)))


def read_counts(db: sqlite3.Connection) -> tuple[int, list[tuple[str, str]]]:
    """Files read into the index (as last recorded), and the skipped files (path, reason) in path order."""
    recorded = get_meta(db, "files_read")
    if recorded is None:
        (count,) = db.execute("SELECT count(*) FROM files WHERE skipped IS NULL").fetchone()
    else:
        count = int(recorded)
    skipped = db.execute("SELECT path, skipped FROM files WHERE skipped IS NOT NULL ORDER BY path").fetchall()
    return int(count), [(str(p), str(r)) for p, r in skipped]


__all__ = [
    "NewPassage",
    "Signature",
    "StoredFile",
    "StoredPassage",
    "clean_rows",
    "clear",
    "count_read",
    "connect",
    "flagged_passages",
    "folder_of",
    "folder_rows",
    "get_meta",
    "Connections",
    "plain_passages",
    "put_file",
    "put_skipped",
    "read_counts",
    "remove_file",
    "passages_by_id",
    "set_folder_rows",
    "set_meta",
    "set_signature",
    "stored_file",
    "stored_files",
    "stored_signatures",
    "writing",
]

"""The persistent, incremental corpus index that research and review share.

One SQLite file per corpus folder (the record, see `roles.index_file`) and
beside it one tantivy folder (the search engine, see `roles.index_search`),
in the index folder (`PRESSROOM_INDEX_DIR`, by default beside the SQLite
database). Every saga on that corpus, in any process, uses the same pair.

- `CorpusIndex.refresh()` walks the corpus and stats every file. A folder
  whose listing (names and stat signatures) is the one recorded at the end
  of the last refresh is not looked at file by file (`roles.index_walk`).
  A file whose stat signature (size, mtime, ctime, inode) is the one
  recorded is not read. Any other file is read through the `Reader`; when its sha256
  is the recorded one only the signature is updated, otherwise its passages
  are replaced (cut and assessed exactly as `collect_evidence()` does).
  Files gone from the folder lose their passages. The report says which
  files were added, changed and removed. All of it happens under the SQLite
  write lock (``BEGIN IMMEDIATE``): the engine commits first, then SQLite,
  both at the next generation.
- `CorpusIndex.evidence()` answers with the same suspicious passages, the
  same reasons, skipped files and file count as `ranking.collect_evidence()`,
  and ranks the clean passages with the engine's top-k BM25 (the engine holds
  exactly the passages that no brief can flag; a brief that names a URL
  found in the corpus ranks its passages in a per-call engine index built
  from the stored passages, still without reading a file). It reads the
  SQLite snapshot and the engine at one generation; when they differ (a
  refresh between its two commits, or one that died there) it waits for the
  write lock and, if they still differ, rebuilds the engine from SQLite.
- `CorpusIndex.source()` is `corpus.read_source()` through the index: the
  same path checks, then the stored text and digest while the file's
  signature is unchanged, or a fresh read that also updates the index.

The `Reader` is the only thing here that reads file contents.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Protocol

import tantivy

from orchestrator.core.clock import SYSTEM_CLOCK, Clock
from orchestrator.core.errors import InvalidInput
from roles import index_file as store
from roles import index_search
from roles import index_walk as walk
from roles.artifacts import Evidence, Passage, SkippedFile, SourceFile
from roles.corpus import (
    MAX_PASSAGE_CHARS,
    Unusable,
    check_source_path,
    existing_root,
    read_file,
    split_passages,
)
from roles.injection import RULES_VERSION, assess_parts, taints_source, url_reasons
from roles.ranking import DEFAULT_LIMIT, TAINTED_SOURCE, query_terms

ANALYZER: Final = f"3;{index_search.ENGINE};{MAX_PASSAGE_CHARS};{RULES_VERSION}"
MAX_FILES: Final = 1_000_000
MAX_FILE_BYTES: Final = 1_000_000


class Reader(Protocol):
    """Reads one candidate file of the corpus at `base`; raises `corpus.Unusable`."""

    def __call__(self, base: Path, path: Path, rel: str) -> SourceFile: ...


def read_from_disk(base: Path, path: Path, rel: str) -> SourceFile:
    return read_file(base, path, rel, MAX_FILE_BYTES)


@dataclass(frozen=True)
class Refresh:
    """What one refresh did. `unchanged` counts files the index already held as they are."""

    corpus: str
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0
    skipped: tuple[SkippedFile, ...] = ()
    files_read: int = 0
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def summary(self) -> dict[str, object]:
        return {
            "corpus": self.corpus,
            "added": list(self.added),
            "changed": list(self.changed),
            "removed": list(self.removed),
            "unchanged": self.unchanged,
            "skipped": [s.model_dump() for s in self.skipped],
            "files_read": self.files_read,
        }


class CorpusIndexes:
    """The index folder: one `CorpusIndex` per corpus folder, all with the same reader, dating
    their refreshes by `clock` (the application's, the database's time: a saga's submit time
    is compared with them)."""

    def __init__(
        self,
        folder: Path,
        *,
        reader: Reader = read_from_disk,
        max_files: int = MAX_FILES,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.folder = Path(folder)
        self.reader = reader
        self.max_files = max_files
        self.clock = clock
        self.connections = store.Connections()
        self.engines = index_search.Engines()

    def for_corpus(self, root: Path | str) -> CorpusIndex:
        base = existing_root(Path(root))
        name = hashlib.sha256(str(base).encode("utf-8")).hexdigest()[:32]
        return CorpusIndex(
            base,
            self.folder / f"{name}.sqlite",
            self.reader,
            self.max_files,
            self.connections,
            self.clock,
            self.engines,
        )


class CorpusIndex:
    """The index of one corpus folder."""

    def __init__(
        self,
        base: Path,
        file: Path,
        reader: Reader,
        max_files: int,
        connections: store.Connections | None = None,
        clock: Clock = SYSTEM_CLOCK,
        engines: index_search.Engines | None = None,
    ) -> None:
        self.base = base
        self.file = file
        self.engine_folder = file.with_suffix(".tantivy")
        self.reader = reader
        self.max_files = max_files
        self.connections = connections or store.Connections()
        self.clock = clock
        self.engines = engines or index_search.Engines()

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            with self.connections.opened(self.file) as db:
                yield db
        except sqlite3.DatabaseError as error:
            raise InvalidInput(f"the corpus index {self.file} cannot be used: {error}") from None
        except index_search.EngineError as error:
            raise InvalidInput(f"the corpus index {self.engine_folder} cannot be used: {error}") from None

    def _engine(self) -> index_search.Engine:
        return self.engines.get(self.engine_folder)

    @contextmanager
    def _reading(self, db: sqlite3.Connection) -> Iterator[tantivy.Searcher]:
        """A SQLite read snapshot and an engine searcher at the same generation."""
        engine = self._engine()
        db.execute("BEGIN")
        generation = _generation(db)
        searcher = engine.searcher()
        if index_search.Engine.generation(searcher) == generation:
            yield searcher
            return
        db.execute("ROLLBACK")
        # A refresh is between its two commits, or died there: wait for the write lock.
        with store.writing(db):
            yield self._matching(db)

    def _matching(self, db: sqlite3.Connection, batch: index_search.Batch | None = None) -> tantivy.Searcher:
        """Under the write lock: the engine's searcher, the engine rebuilt from SQLite first when
        its generation is not SQLite's. With `batch`, the rebuild is left to the caller's commit."""
        engine = self._engine()
        searcher = engine.searcher()
        if index_search.Engine.generation(searcher) == _generation(db):
            return searcher
        own = batch or engine.batch()
        try:
            own.clear()
            own.add(store.clean_rows(db))
            if batch is None:
                _commit_engine(db, own)
        except BaseException:
            own.abandon()
            raise
        return engine.searcher()

    # -- refreshing ----------------------------------------------------------------------

    def refresh(self) -> Refresh:
        """Bring the index up to date with the folder; see the module docstring."""
        started = self.clock.now()
        added: list[str] = []
        changed: list[str] = []
        unchanged = reads = 0
        limited: SkippedFile | None = None
        with self._db() as db, store.writing(db):
            # The walk runs under the write lock: a listing taken before it would be applied
            # after another process's refresh, and remove the files that one had added.
            folders = walk.walk(self.base)
            batch = self._engine().batch()
            try:
                if store.get_meta(db, "analyzer") != ANALYZER:
                    store.clear(db)
                    store.set_meta(db, "analyzer", ANALYZER)
                    batch.clear()
                else:
                    self._matching(db, batch)
                recorded = store.folder_rows(db)
                todo = walk.plan(folders, recorded, lambda prefix: store.stored_signatures(db, prefix))
                if todo.candidates > self.max_files:
                    todo, limited = self._plan_limited(db, folders)
                unchanged = todo.unchanged
                for check in todo.check:
                    reads += 1
                    held = store.stored_file(db, check.rel) if check.known else None
                    before = held[0] if held else None
                    outcome = self._index_file(
                        db, batch, check.rel, Path(check.path), check.signature, before
                    )
                    if outcome == "unchanged":
                        unchanged += 1
                    else:
                        (added if before is None else changed).append(check.rel)
                for rel in todo.gone:
                    store.remove_file(db, rel)
                    batch.remove(rel)
                store.set_folder_rows(db, todo.rows, recorded)
                store.set_meta(db, "refreshed_at", started.isoformat())
                if todo.check or todo.gone:
                    store.count_read(db)
                _, skipped = store.read_counts(db)
                if batch.changed:
                    _commit_engine(db, batch)
            except BaseException:
                batch.abandon()
                raise
        skipped_files = [SkippedFile(path=p, reason=r) for p, r in skipped]
        if limited is not None:
            skipped_files.append(limited)
        return Refresh(
            corpus=str(self.base),
            added=tuple(added),
            changed=tuple(changed),
            removed=tuple(todo.gone),
            unchanged=unchanged,
            skipped=tuple(skipped_files),
            files_read=reads,
            started_at=started,
        )

    def _plan_limited(
        self, db: sqlite3.Connection, folders: dict[str, walk.Folder]
    ) -> tuple[walk.Plan, SkippedFile]:
        """More candidate files than `max_files`: the first ones in corpus-path order, each
        compared with its recorded signature, and no folder listing trusted next time."""
        found = walk.every_candidate(folders)
        limited = SkippedFile(
            path=found[self.max_files][0], reason=f"file limit of {self.max_files} reached; not read"
        )
        known = store.stored_signatures(db)
        todo = walk.Plan(candidates=self.max_files)
        for rel, path, signature in found[: self.max_files]:
            was_known = rel in known
            recorded = known.pop(rel, None)
            if was_known and signature is not None and recorded == signature:
                todo.unchanged += 1
            else:
                todo.check.append(walk.Check(rel, path, signature, was_known))
            prefix = store.folder_of(rel)
            todo.rows[prefix] = (None, todo.rows.get(prefix, (None, 0))[1] + 1)
        todo.gone = sorted(known)
        return todo, limited

    def refresh_unless_since(self, moment: datetime) -> Refresh | None:
        """Refresh, unless a walk that began at or after `moment` already did."""
        with self._db() as db:
            last = store.get_meta(db, "refreshed_at")
            analyzer = store.get_meta(db, "analyzer")
        if last is not None and analyzer == ANALYZER and datetime.fromisoformat(last) >= moment:
            return None
        return self.refresh()

    def _index_file(
        self,
        db: sqlite3.Connection,
        batch: index_search.Batch,
        rel: str,
        path: Path,
        signature: store.Signature | None,
        before: store.StoredFile | None,
    ) -> str:
        try:
            file = self.reader(self.base, path, rel)
        except Unusable as why:
            if before is not None and before.skipped == str(why):
                store.set_signature(db, rel, signature)
                return "unchanged"
            store.put_skipped(db, rel, signature, str(why))
            if before is not None:
                batch.remove(rel)
            return "indexed"
        if before is not None and before.skipped is None and before.digest == file.digest:
            store.set_signature(db, rel, signature)
            return "unchanged"
        passages, tainted = assessed_passages(file)
        clean = store.put_file(db, rel, signature, file.digest, file.text, passages, tainted)
        if before is not None:
            batch.remove(rel)
        batch.add(clean)
        return "indexed"

    # -- answering -----------------------------------------------------------------------

    def evidence(self, brief: str, *, limit: int = DEFAULT_LIMIT) -> Evidence:
        """`collect_evidence(brief, load_corpus(root), limit=limit)`, from the index."""
        with self._db() as db, self._reading(db) as searcher:
            files_read, skipped = store.read_counts(db)
            suspicious: list[Passage] = []
            allowed: list[Passage] = []
            for row in store.flagged_passages(db):
                reasons = [*row.reasons, *url_reasons(row.urls, brief)]
                if row.tainted and not reasons:
                    reasons = [TAINTED_SOURCE]
                if reasons:
                    suspicious.append(
                        row.passage.model_copy(update={"suspicious": True, "reasons": tuple(reasons)})
                    )
                else:
                    allowed.append(row.passage)
            terms = query_terms(brief)
            if not allowed:
                scored = index_search.top(searcher, terms, limit)
                found = store.passages_by_id(db, [i for i, _ in scored])
                ranked = [found[i].model_copy(update={"score": s}) for i, s in scored if i in found]
            else:
                clean = sorted([*store.plain_passages(db), *allowed], key=lambda p: (p.source, p.start))
                scored = index_search.rank_texts(terms, [p.text for p in clean], limit)
                ranked = [clean[i].model_copy(update={"score": s}) for i, s in scored]
        return Evidence(
            brief=brief,
            passages=tuple(ranked),
            suspicious=tuple(suspicious),
            skipped=tuple(SkippedFile(path=p, reason=r) for p, r in skipped),
            files_read=files_read,
        )

    def source(self, rel_path: str) -> SourceFile:
        """`corpus.read_source()` through the index: no read while the file is as indexed."""
        path = check_source_path(self.base, rel_path)
        signature = _signature(path)
        with self._db() as db:
            held = store.stored_file(db, rel_path)
            if held is not None and signature is not None and held[0].signature == signature:
                row, text = held
                if row.skipped is not None:
                    raise InvalidInput(f"source {rel_path} cannot be used: {row.skipped}", path=rel_path)
                if row.digest is not None and text is not None:
                    return SourceFile(path=rel_path, digest=row.digest, text=text)
            with store.writing(db):
                batch = self._engine().batch()
                try:
                    self._matching(db, batch)
                    self._index_file(db, batch, rel_path, path, signature, held[0] if held else None)
                    store.count_read(db)
                    if batch.changed:
                        _commit_engine(db, batch)
                except BaseException:
                    batch.abandon()
                    raise
                fresh = store.stored_file(db, rel_path)
        assert fresh is not None
        row, text = fresh
        if row.skipped is not None or row.digest is None or text is None:
            raise InvalidInput(f"source {rel_path} cannot be used: {row.skipped}", path=rel_path)
        return SourceFile(path=rel_path, digest=row.digest, text=text)


def _generation(db: sqlite3.Connection) -> int:
    return int(store.get_meta(db, "generation") or 0)


def _commit_engine(db: sqlite3.Connection, batch: index_search.Batch) -> None:
    """Commit the engine at the next generation, then record it in the (uncommitted) SQLite
    transaction: a crash between the two leaves the engine ahead, which readers detect."""
    generation = _generation(db) + 1
    batch.commit(generation)
    store.set_meta(db, "generation", str(generation))


def assessed_passages(file: SourceFile) -> tuple[list[store.NewPassage], bool]:
    """A file's passages with their brief-independent assessment, and whether it is tainted."""
    out: list[store.NewPassage] = []
    for p in split_passages(file):
        reasons, urls = assess_parts(p.text)
        out.append(store.NewPassage(p.start, p.end, p.text, tuple(reasons), tuple(urls)))
    return out, any(taints_source(p.reasons) for p in out)


def _signature(path: str | Path) -> store.Signature | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


__all__ = [
    "ANALYZER",
    "CorpusIndex",
    "CorpusIndexes",
    "Reader",
    "Refresh",
    "assessed_passages",
    "read_from_disk",
]

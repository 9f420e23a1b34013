"""The corpus: reading source files from one folder, and cutting them into passages.

This module owns the only file reading the roles do. `load_corpus()` walks a
folder for ``.md`` and ``.txt`` files; `read_source()` re-reads one file by its
relative path (the reviewer checks quotes against the files, never against the
writer's evidence). Neither follows a path out of the corpus root. A file that
cannot be used (binary, too large, not UTF-8, unreadable, a symlink leaving the
root) is reported as a `SkippedFile`, never a crash; a missing corpus folder is
`InvalidInput`. Entries whose name starts with a dot are ignored.

`split_passages()` and `sentence_spans()` are pure: offsets index the decoded
text exactly, so ``text[start:end] == passage.text`` always holds.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator.core.errors import InvalidInput, NotFound
from roles.artifacts import Passage, SkippedFile, SourceFile

SUFFIXES = frozenset({".md", ".txt"})
MAX_PASSAGE_CHARS = 600


class SourceOutsideCorpus(InvalidInput):
    """A source path that would leave the corpus root (absolute, `..`, a symlink out)."""


@dataclass(frozen=True)
class CorpusLoad:
    """The result of one walk: files read (sorted by path) and files skipped."""

    files: tuple[SourceFile, ...]
    skipped: tuple[SkippedFile, ...]


def load_corpus(root: Path, *, max_file_bytes: int = 1_000_000, max_files: int = 5000) -> CorpusLoad:
    """Read every ``.md``/``.txt`` file under `root`, recursively, in path order.

    At most `max_files` candidate files are looked at; the first one beyond the
    limit is reported as skipped and the walk stops there.
    """
    base = _existing_root(root)
    files: list[SourceFile] = []
    skipped: list[SkippedFile] = []
    seen = 0
    for path in _candidates(base):
        rel = path.relative_to(base).as_posix()
        if seen >= max_files:
            skipped.append(SkippedFile(path=rel, reason=f"file limit of {max_files} reached; not read"))
            break
        seen += 1
        try:
            files.append(_read(base, path, rel, max_file_bytes))
        except _Unusable as why:
            skipped.append(SkippedFile(path=rel, reason=str(why)))
    return CorpusLoad(files=tuple(files), skipped=tuple(skipped))


def read_source(root: Path, rel_path: str, *, max_file_bytes: int = 1_000_000) -> SourceFile:
    """Re-read one source by its corpus-relative path.

    Raises `SourceOutsideCorpus` for a path that leaves the root, `NotFound` for
    a file that is not there, and `InvalidInput` for one that cannot be used.
    """
    base = _existing_root(root)
    path = check_source_path(base, rel_path)
    pure = PurePosixPath(rel_path)
    try:
        return _read(base, path, pure.as_posix(), max_file_bytes)
    except _Unusable as why:
        raise InvalidInput(f"source {rel_path} cannot be used: {why}", path=rel_path) from None


def split_passages(file: SourceFile, *, max_chars: int = MAX_PASSAGE_CHARS) -> list[Passage]:
    """Cut a file into passages: paragraphs separated by blank lines.

    Markdown heading lines end a paragraph and are not passages themselves. A
    paragraph longer than `max_chars` is packed sentence by sentence into pieces
    of at most `max_chars`; a single longer sentence is cut at whitespace.
    """
    passages: list[Passage] = []
    for start, end in _paragraph_spans(file.text):
        for s, e in _pack(file.text, start, end, max_chars):
            passages.append(
                Passage(source=file.path, source_digest=file.digest, start=s, end=e, text=file.text[s:e])
            )
    return passages


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans (trimmed of whitespace) of ``text[start:end]``, in text offsets.

    A sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes or brackets)
    followed by whitespace and a capital, digit, quote or bracket; common
    abbreviations and single initials do not end a sentence.
    """
    stop = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    begin = start
    for m in _TERMINAL.finditer(text, start, stop):
        after = _skip_space(text, m.end(), stop)
        if after < stop and (after == m.end() or not _opens_sentence(text[after])):
            continue
        if _is_abbreviation(text, begin, m.start()):
            continue
        spans.extend(_trimmed(text, begin, m.end()))
        begin = after
    spans.extend(_trimmed(text, begin, stop))
    return spans


# -- reading -------------------------------------------------------------------------------


class Unusable(Exception):
    """A file that exists but cannot be used as a source; the message says why."""


_Unusable = Unusable


def existing_root(root: Path) -> Path:
    """The corpus folder, resolved; `InvalidInput` when it is not a folder."""
    return _existing_root(root)


def candidates(base: Path) -> list[Path]:
    """Every ``.md``/``.txt`` file under `base` (dot entries left out), in corpus-path order."""
    return _candidates(base)


def read_file(base: Path, path: Path, rel: str, max_file_bytes: int = 1_000_000) -> SourceFile:
    """Read one candidate file of the corpus at `base`; `Unusable` says why it cannot be used."""
    return _read(base, path, rel, max_file_bytes)


def check_source_path(base: Path, rel_path: str) -> Path:
    """The file a corpus-relative path names, checked the way `read_source()` checks it."""
    pure = PurePosixPath(rel_path)
    if not rel_path or pure.is_absolute() or ".." in pure.parts or "\\" in rel_path:
        raise SourceOutsideCorpus(f"source path leaves the corpus: {rel_path!r}", path=rel_path)
    path = base.joinpath(*pure.parts)
    if not path.resolve().is_relative_to(base):
        raise SourceOutsideCorpus(f"source path leaves the corpus: {rel_path!r}", path=rel_path)
    if not path.is_file():
        raise NotFound(f"source not found: {rel_path}", path=rel_path)
    if pure.suffix.lower() not in SUFFIXES or any(part.startswith(".") for part in pure.parts):
        raise InvalidInput(f"not a corpus source: {rel_path}", path=rel_path)
    return path


def _existing_root(root: Path) -> Path:
    if not Path(root).is_dir():
        raise InvalidInput(f"corpus folder not found: {root}", path=str(root))
    return Path(root).resolve()


def _candidates(base: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if not name.startswith(".") and Path(name).suffix.lower() in SUFFIXES:
                found.append(Path(folder, name))
    return sorted(found, key=lambda p: p.relative_to(base).as_posix())


def _read(base: Path, path: Path, rel: str, max_file_bytes: int) -> SourceFile:
    try:
        if not path.resolve().is_relative_to(base):
            raise _Unusable("symlink points outside the corpus")
        if not path.is_file():
            raise _Unusable("not a regular file")
        if path.stat().st_size > max_file_bytes:
            raise _Unusable(f"larger than {max_file_bytes} bytes")
        with path.open("rb") as handle:
            data = handle.read(max_file_bytes + 1)
    except OSError as error:
        raise _Unusable(f"unreadable: {error.strerror or error}") from None
    if len(data) > max_file_bytes:
        raise _Unusable(f"larger than {max_file_bytes} bytes")
    if b"\x00" in data:
        raise _Unusable("binary file (contains a NUL byte)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _Unusable(f"not valid UTF-8 (byte {error.start})") from None
    return SourceFile(path=rel, digest=hashlib.sha256(data).hexdigest(), text=text)


# -- splitting (pure) ----------------------------------------------------------------------

_LINE = re.compile(r"[^\n]*\n?")
_HEADING = re.compile(r"[ ]{0,3}#{1,6}(?:[ \t]|$)")
_TERMINAL = re.compile(r"""[.!?]+["'\u201d\u2019)\]]*""")
_OPENERS = "\"'\u201c\u2018([*_"
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st mt jr sr prof rev gen col capt lt sgt fr vs etc e.g i.e no nos vol co inc ltd "
    "approx dept est fig jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_IGNORABLE = "\ufeff"


def _paragraph_spans(text: str) -> list[tuple[int, int]]:
    """Runs of non-blank, non-heading lines, trimmed."""
    spans: list[tuple[int, int]] = []
    run_start: int | None = None
    pos = 0
    for m in _LINE.finditer(text):
        if m.start() == m.end():
            break
        line = m.group().lstrip(_IGNORABLE)
        breaks = not line.strip() or _HEADING.match(line) is not None
        if breaks and run_start is not None:
            spans.extend(_trimmed(text, run_start, m.start()))
            run_start = None
        elif not breaks and run_start is None:
            run_start = m.start()
        pos = m.end()
    if run_start is not None:
        spans.extend(_trimmed(text, run_start, pos))
    return spans


def _pack(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Greedily join whole sentences into pieces of at most `max_chars`."""
    if end - start <= max_chars:
        return [(start, end)]
    pieces: list[tuple[int, int]] = []
    for s, e in sentence_spans(text, start, end):
        if pieces and e - pieces[-1][0] <= max_chars:
            pieces[-1] = (pieces[-1][0], e)
        else:
            pieces.extend(_cut(text, s, e, max_chars))
    return pieces


def _cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut one overlong sentence at the last whitespace before each limit."""
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        limit = start + max_chars
        split = max((i for i in range(start + 1, limit) if text[i].isspace()), default=limit)
        pieces.extend(_trimmed(text, start, split))
        start = _skip_space(text, split, end)
    pieces.extend(_trimmed(text, start, end))
    return pieces


def _trimmed(text: str, start: int, end: int) -> list[tuple[int, int]]:
    while start < end and (text[start].isspace() or text[start] in _IGNORABLE):
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return [(start, end)] if start < end else []


def _skip_space(text: str, pos: int, stop: int) -> int:
    while pos < stop and text[pos].isspace():
        pos += 1
    return pos


def _opens_sentence(char: str) -> bool:
    return char.isupper() or char.isdigit() or char in _OPENERS


def _is_abbreviation(text: str, begin: int, dot: int) -> bool:
    if text[dot] != ".":
        return False
    word_start = dot
    while word_start > begin and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start:dot].lstrip("(\"'\u201c").lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())

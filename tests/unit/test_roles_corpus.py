"""Corpus loading, source re-reading and passage splitting, on real files in tmp_path."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.errors import InvalidInput, NotFound
from roles.artifacts import SourceFile
from roles.corpus import (
    SourceOutsideCorpus,
    load_corpus,
    read_source,
    sentence_spans,
    split_passages,
)

pytestmark = pytest.mark.unit


def _write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8"))
    return path


def _source(text: str, path: str = "a.md") -> SourceFile:
    return SourceFile(path=path, digest=hashlib.sha256(text.encode()).hexdigest(), text=text)


def test_load_reads_md_and_txt_recursively_in_path_order(tmp_path: Path) -> None:
    _write(tmp_path, "b.md", "Bee.")
    _write(tmp_path, "a/z.txt", "Zed.")
    _write(tmp_path, "a/c.MD", "Sea.")
    _write(tmp_path, "notes.rst", "ignored")
    _write(tmp_path, ".hidden.md", "ignored")
    _write(tmp_path, ".git/HEAD.md", "ignored")

    load = load_corpus(tmp_path)

    assert [f.path for f in load.files] == ["a/c.MD", "a/z.txt", "b.md"]
    assert load.skipped == ()
    assert load.files[2].text == "Bee."
    assert load.files[2].digest == hashlib.sha256(b"Bee.").hexdigest()


def test_unusable_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    _write(tmp_path, "good.md", "Fine text.")
    _write(tmp_path, "binary.txt", b"abc\x00def")
    _write(tmp_path, "latin1.txt", "café".encode("latin-1"))
    _write(tmp_path, "big.md", "x" * 2000)

    load = load_corpus(tmp_path, max_file_bytes=1000)

    reasons = {s.path: s.reason for s in load.skipped}
    assert [f.path for f in load.files] == ["good.md"]
    assert "NUL" in reasons["binary.txt"]
    assert "UTF-8" in reasons["latin1.txt"]
    assert "larger than 1000 bytes" in reasons["big.md"]


def test_file_limit_stops_the_walk_and_says_so(tmp_path: Path) -> None:
    for i in range(5):
        _write(tmp_path, f"f{i}.md", f"File {i}.")

    load = load_corpus(tmp_path, max_files=3)

    assert [f.path for f in load.files] == ["f0.md", "f1.md", "f2.md"]
    assert [s.path for s in load.skipped] == ["f3.md"]
    assert "file limit of 3" in load.skipped[0].reason


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinks_never_lead_out_of_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside, "secret.md", "Secret text.")
    root = tmp_path / "corpus"
    _write(root, "inside.md", "Inside text.")
    (root / "leak.md").symlink_to(outside / "secret.md")
    (root / "alias.md").symlink_to(root / "inside.md")
    (root / "folder").symlink_to(outside, target_is_directory=True)

    load = load_corpus(root)

    assert [f.path for f in load.files] == ["alias.md", "inside.md"]
    assert [(s.path, s.reason) for s in load.skipped] == [("leak.md", "symlink points outside the corpus")]
    with pytest.raises(SourceOutsideCorpus):
        read_source(root, "leak.md")
    with pytest.raises(SourceOutsideCorpus):
        read_source(root, "folder/secret.md")


def test_missing_or_non_folder_corpus_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="corpus folder not found"):
        load_corpus(tmp_path / "nope")
    file = _write(tmp_path, "file.md", "Text.")
    with pytest.raises(InvalidInput, match="corpus folder not found"):
        load_corpus(file)


def test_read_source_rereads_one_file(tmp_path: Path) -> None:
    _write(tmp_path, "sub/doc.md", "Some words.")

    source = read_source(tmp_path, "sub/doc.md")

    assert source.path == "sub/doc.md"
    assert source.text == "Some words."
    assert source.digest == hashlib.sha256(b"Some words.").hexdigest()


@pytest.mark.parametrize("bad", ["../escape.md", "/etc/passwd", "sub/../../escape.md", "", "sub\\..\\x.md"])
def test_read_source_refuses_paths_out_of_the_root(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "corpus"
    _write(root, "sub/doc.md", "Some words.")
    _write(tmp_path, "escape.md", "Outside.")

    with pytest.raises(SourceOutsideCorpus):
        read_source(root, bad)


def test_read_source_errors_are_typed(tmp_path: Path) -> None:
    _write(tmp_path, "latin1.md", "café".encode("latin-1"))
    _write(tmp_path, "script.py", "print('x')")

    with pytest.raises(NotFound):
        read_source(tmp_path, "missing.md")
    with pytest.raises(InvalidInput, match="UTF-8"):
        read_source(tmp_path, "latin1.md")
    with pytest.raises(InvalidInput, match="not a corpus source"):
        read_source(tmp_path, "script.py")


def test_passages_are_paragraphs_without_headings() -> None:
    text = "# Title\nFirst paragraph,\nwrapped.\n\n\nSecond one.\n## Part\nThird.\n"
    passages = split_passages(_source(text))

    assert [p.text for p in passages] == ["First paragraph,\nwrapped.", "Second one.", "Third."]
    for p in passages:
        assert text[p.start : p.end] == p.text
        assert p.source == "a.md"
        assert not p.suspicious


def test_crlf_and_bom_keep_exact_offsets() -> None:
    text = "\ufeffFirst line.\r\nSame paragraph.\r\n\r\nSecond paragraph.\r\n"
    passages = split_passages(_source(text))

    assert [p.text for p in passages] == ["First line.\r\nSame paragraph.", "Second paragraph."]
    assert all(text[p.start : p.end] == p.text for p in passages)


def test_long_paragraphs_split_at_sentence_boundaries() -> None:
    sentences = [f"Sentence number {i} talks about the reading room and its shelves." for i in range(30)]
    text = " ".join(sentences)

    passages = split_passages(_source(text), max_chars=200)

    assert len(passages) > 1
    assert all(len(p.text) <= 200 for p in passages)
    assert all(p.text.endswith(".") for p in passages)
    assert " ".join(p.text for p in passages) == text


def test_a_sentence_longer_than_the_limit_is_cut_at_whitespace() -> None:
    text = " ".join(["word"] * 100) + " " + "x" * 50

    passages = split_passages(_source(text), max_chars=60)

    assert all(len(p.text) <= 60 for p in passages)
    assert all(not p.text.startswith(" ") and not p.text.endswith(" ") for p in passages)
    assert "".join(p.text for p in passages).replace(" ", "") == text.replace(" ", "")


def test_sentences_respect_abbreviations_and_decimals() -> None:
    text = 'Dr. Smith opened the St. Mary branch in 1902. It had 3.5 metres of shelves! Was it busy? "Yes." J. Doe said so.'
    found = [text[s:e] for s, e in sentence_spans(text)]
    assert found == [
        "Dr. Smith opened the St. Mary branch in 1902.",
        "It had 3.5 metres of shelves!",
        "Was it busy?",
        '"Yes."',
        "J. Doe said so.",
    ]


_TEXT = st.text(alphabet=st.sampled_from(list("ab Z.!?\n\n\r\t\ufeff#é,'\"")), max_size=400)


@given(_TEXT, st.integers(min_value=5, max_value=120))
def test_passage_offsets_always_slice_back(text: str, max_chars: int) -> None:
    passages = split_passages(_source(text), max_chars=max_chars)
    previous_end = 0
    for p in passages:
        assert text[p.start : p.end] == p.text
        assert p.text == p.text.strip() and p.text
        assert len(p.text) <= max_chars
        assert p.start >= previous_end
        previous_end = p.end


@given(st.text(alphabet=st.sampled_from(list("ab Z.!?\n\r\t,")), max_size=400))
def test_passages_cover_every_visible_character_without_headings(text: str) -> None:
    passages = split_passages(_source(text), max_chars=50)
    visible = "".join(c for c in text if not c.isspace())
    assert "".join(c for p in passages for c in p.text if not c.isspace()) == visible


@given(st.text(alphabet=st.sampled_from(list("ab Z.!?\n\"')")), max_size=300))
def test_sentence_spans_are_ordered_trimmed_slices(text: str) -> None:
    end = 0
    for s, e in sentence_spans(text):
        assert end <= s < e <= len(text)
        assert text[s:e] == text[s:e].strip()
        end = e

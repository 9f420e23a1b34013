"""A `site:` folder swapped for a link while publishes run: no byte lands outside the roots.

A thread exchanges the site folder (or its parent) with a link to a folder
outside the allowed roots and back, atomically (`renameat2(RENAME_EXCHANGE)`,
so the name always exists and is sometimes the link), as fast as it can while
the publishes run through the adapter with the roots set. The run is bounded
in count and in time. At the end the outside folder is walked: it must hold
exactly what it held before.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.core.errors import NotApplied
from sagas.destinations.base import PublishedVersion
from sagas.destinations.registry import open_destination

PUBLISHES = 200
TIME_LIMIT = 120.0  # seconds: the loop stops here even if slower than expected (then the count fails)

_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> None:
    """Swap the names `a` and `b` in one step."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@contextmanager
def swapping(real: Path, decoy: Path, pause: float = 0.0) -> Iterator[list[int]]:
    """Keep exchanging `real` (a folder) with `decoy` (a link) until the block ends,
    resting `pause` seconds in each state."""
    stop = threading.Event()
    swaps = [0]

    def loop() -> None:
        while not stop.is_set():
            exchange(real, decoy)
            time.sleep(pause)
            exchange(real, decoy)  # back: `real` is the folder again
            swaps[0] += 1
            time.sleep(pause)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive() and not real.is_symlink()


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def version(n: int) -> PublishedVersion:
    markdown = f"# Race {n}\n\nPublished while the folder moves.\n"
    return PublishedVersion(
        saga_id=uuid.uuid4().hex,
        version=1,
        version_digest=hashlib.sha256(markdown.encode()).hexdigest(),
        title=f"Race {n}",
        slug="",
        markdown=markdown,
    )


@pytest.mark.parametrize("swapped", ["site folder", "parent folder"])
def test_a_folder_swapped_for_a_link_during_publishes_never_sends_a_byte_outside(
    tmp_path: Path, swapped: str
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    folder = allowed / "parent" / "site"
    folder.mkdir(parents=True)
    (outside / "site").mkdir(parents=True)  # what the link leads to looks like a site folder
    (outside / "canary.txt").write_text("outside")
    moving = folder if swapped == "site folder" else folder.parent
    decoy = moving.with_name(moving.name + "-decoy")
    decoy.symlink_to(outside / "site" if swapped == "site folder" else outside, target_is_directory=True)
    before = files_under(outside)
    dest = open_destination(f"site:{folder}", timeout=10, roots=[allowed.resolve()])

    applied: list[dict[str, str]] = []
    refused: list[str] = []
    started = time.monotonic()
    with swapping(moving, decoy) as swaps:
        for n in range(PUBLISHES):
            if time.monotonic() - started > TIME_LIMIT:
                break
            try:
                applied.append(dest.publish(f"race-{n}", version(n)))
            except NotApplied as exc:
                refused.append(str(exc))

    assert len(applied) + len(refused) == PUBLISHES, "the run finished within its time bound"
    assert swaps[0] > 0
    assert files_under(outside) == before, "no byte landed outside the allowed roots"
    assert sorted(os.listdir(outside / "site")) == []
    assert applied and refused, "the race was real: some publishes met the link, some did not"
    for receipt in applied:  # what was applied is inside, where its receipt says
        assert Path(receipt["path"]).is_file() and Path(receipt["path"]).is_relative_to(allowed.resolve())
    assert all("\n" not in reason for reason in refused)

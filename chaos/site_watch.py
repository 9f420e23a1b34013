"""A journal of the site folder's effects, kept by watching its receipts.

The `site:` destination writes `PATH/.pressroom/receipts/<key>.json` last when
it applies a key and removes it when it compensates. A thread looks every
`every` seconds: a receipt that appears (or whose file identity, inode and
mtime, changes) is an apply of that key, one that disappears an undo. A
delete and re-create between two looks with the same inode and mtime would
be missed; the site destination's writes replace the file (a new inode), so
in practice every rewrite is seen.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any


class SiteWatch:
    def __init__(self, folder: Path, journal: Path, *, every: float = 0.05) -> None:
        self.receipts = folder / ".pressroom" / "receipts"
        self.journal = journal
        self.every = every
        self.events: list[dict[str, Any]] = []
        self._seen: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="site-watch")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.look()  # one last look, so nothing written at the end is missed

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.look()

    def look(self) -> None:
        now: dict[str, tuple[int, int]] = {}
        try:
            entries = list(os.scandir(self.receipts))
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if not entry.name.endswith(".json") or entry.name.startswith("."):
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            now[entry.name[: -len(".json")]] = (st.st_ino, st.st_mtime_ns)
        for key, ident in now.items():
            if self._seen.get(key) != ident:
                self._note("apply", key)
        for key in self._seen.keys() - now.keys():
            self._note("undo", key)
        self._seen = now

    def _note(self, kind: str, key: str) -> None:
        digest = None
        if kind == "apply":
            try:
                digest = json.loads((self.receipts / f"{key}.json").read_text(encoding="utf-8")).get("sha256")
            except (OSError, ValueError):
                digest = None
        entry = {"kind": kind, "key": key, "saga_id": None, "version_digest": digest, "at": time.time()}
        self.events.append(entry)
        with self.journal.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def live(self) -> dict[str, str | None]:
        """Key -> digest of every receipt present now."""
        out: dict[str, str | None] = {}
        for path in sorted(self.receipts.glob("*.json")) if self.receipts.is_dir() else []:
            try:
                out[path.stem] = json.loads(path.read_text(encoding="utf-8")).get("sha256")
            except (OSError, ValueError):
                out[path.stem] = None
        return out

    def is_applied(self, key: str) -> bool:
        return (self.receipts / f"{key}.json").exists()

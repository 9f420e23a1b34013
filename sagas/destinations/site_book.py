"""The bookkeeping of one open `site:` folder: its folders, staged files, saved pages.

Owns the layout under `PATH/.pressroom/` and how a step's files go live:

- `open_book()` pins PATH (`pinned.pin_folder`) and opens `.pressroom/`,
  `receipts/` and `previous/` below it, each without following a link.
- `Book.stage_*` write a step's files to temporary names; `commit()` renames
  them into place in order and makes the renames durable; `discard()` drops
  what was staged and not renamed.
- `save_previous()` keeps a page as it was before a key replaced it
  (`previous/<key>/`: `page.md`, `page.html`, `state.json`), written to a
  staging folder and renamed in whole; `restore()` puts it back.

`pages.json` holds the listing (`site_names`); `index.html` is rendered from it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sagas.destinations.pinned import Folder, pin_folder
from sagas.destinations.site_names import Entry, dump_pages, parse_pages, titles
from sagas.destinations.site_render import render_index

INDEX = "index.html"
PAGES = "pages.json"
Staged = list[tuple[Folder, str, str]]  # (folder, temporary name, final name)


def json_bytes(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8")


def load(folder: Folder | None, name: str) -> dict[str, Any] | None:
    """The JSON object in the plain file `name` of `folder`, or None when there is none."""
    raw = folder.read(name) if folder is not None else None
    if raw is None:
        return None
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"{folder.shown(name) if folder else name} does not hold a JSON object")
    return value


def open_book(path: Path, roots: Sequence[Path], *, create: bool) -> Book | None:
    """PATH and its bookkeeping folders, pinned; None when any is missing and not `create`."""
    try:
        site = pin_folder(path, roots, create=create)
    except FileNotFoundError:
        if create:
            raise
        return None
    opened = [site]
    try:
        for name in (".pressroom", "receipts", "previous"):
            folder = (site if name == ".pressroom" else opened[1]).sub(name, create=create)
            if folder is None:
                break
            opened.append(folder)
    except BaseException:
        for folder in opened:
            folder.close()
        raise
    if len(opened) < 4:
        for folder in opened:
            folder.close()
        return None
    return Book(*opened)


class Book:
    """The site folder and its bookkeeping folders, all open for one call."""

    def __init__(self, site: Folder, meta: Folder, receipts: Folder, previous: Folder) -> None:
        self.site, self.meta, self.receipts, self.previous = site, meta, receipts, previous

    def __enter__(self) -> Book:
        return self

    def __exit__(self, *exc: object) -> None:
        for folder in (self.previous, self.receipts, self.meta, self.site):
            folder.close()

    def receipt(self, key: str) -> dict[str, Any] | None:
        return load(self.receipts, f"{key}.json")

    def pages(self) -> dict[str, Entry]:
        return parse_pages(load(self.meta, PAGES) or {})

    def stage_receipt(self, key: str, receipt: dict[str, Any]) -> Staged:
        name = f"{key}.json"
        return [(self.receipts, self.receipts.stage(name, json_bytes(receipt)), name)]

    def stage_listing(self, pages: dict[str, Entry]) -> Staged:
        """`pages.json` and `index.html` for `pages`."""
        return [
            (self.meta, self.meta.stage(PAGES, json_bytes(dump_pages(pages))), PAGES),
            (self.site, self.site.stage(INDEX, render_index(titles(pages)).encode("utf-8")), INDEX),
        ]

    @staticmethod
    def commit(staged: Staged) -> None:
        """Rename every staged file into place, in order, then make the renames durable."""
        for folder, temp, final in staged:
            folder.move(temp, final)
        for folder in {id(f): f for f, _, _ in staged}.values():
            folder.sync()

    @staticmethod
    def discard(staged: Staged) -> None:
        for folder, temp, _ in staged:
            folder.unlink(temp)  # gone already when it was renamed in

    def forget(self, key: str) -> None:
        """Drop `key`'s receipt and saved page."""
        self.receipts.unlink(f"{key}.json")
        self.receipts.sync()
        self.previous.remove_tree(key)
        self.previous.sync()

    def saved_state(self, key: str) -> dict[str, Any] | None:
        saved = self.previous.sub(key)
        if saved is None:
            return None
        with saved:
            return load(saved, "state.json")

    def save_previous(self, key: str, name: str, sha: str, before: Entry | None) -> None:
        """Keep page `name` as it is, before `key` replaces it (a folder renamed in whole)."""
        staging = f".staging-{secrets.token_hex(6)}"
        self.previous.make_dir(staging)
        try:
            folder = self.previous.sub(staging)
            assert folder is not None  # just made
            with folder:
                state: dict[str, Any] = {
                    "key": key,
                    "name": name,
                    "sha256": sha,
                    "title": before.title if before else None,
                    "saga_id": before.saga_id if before else None,
                }
                for ext in (".md", ".html"):
                    data = self.site.read(f"{name}{ext}")
                    state[f"had_{ext[1:]}"] = data is not None
                    if data is not None:
                        folder.move(folder.stage(f"page{ext}", data), f"page{ext}")
                folder.move(folder.stage("state.json", json_bytes(state)), "state.json")
                folder.sync()
            self.previous.move(staging, key)
            self.previous.sync()
        except BaseException:
            self.previous.remove_tree(staging)
            raise

    def restore(self, saved: Folder | None, name: str, state: dict[str, Any]) -> None:
        """Page `name` and its line of the index as `state` (and `saved`) say they were."""
        staged: Staged = []
        removed: list[str] = []
        try:
            for ext, had in ((".md", "had_md"), (".html", "had_html")):
                before = saved.read(f"page{ext}") if saved is not None and state.get(had) else None
                if before is None:
                    removed.append(f"{name}{ext}")
                else:
                    staged.append((self.site, self.site.stage(f"{name}{ext}", before), f"{name}{ext}"))
            pages = self.pages()
            title, saga = state.get("title"), state.get("saga_id")
            if isinstance(title, str):
                pages[name] = Entry(title, saga if isinstance(saga, str) else None)
            else:
                pages.pop(name, None)
            staged += self.stage_listing(pages)
            self.commit(staged)
        except BaseException:
            self.discard(staged)
            raise
        for page in removed:
            self.site.unlink(page)
        self.site.sync()


__all__ = ["INDEX", "PAGES", "Book", "Staged", "load", "open_book"]

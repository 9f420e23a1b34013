"""`site:PATH`: a static site folder, one page per published version.

- URI: `site:PATH`; the folder is created if missing. Publishing writes
  `<slug>.md` (bytes identical to the version's markdown, so its sha256 is
  the version digest), `<slug>.html` (rendered by `site_render`: raw HTML
  escaped, citation markers linked to the Sources footnotes), `index.html`
  (every page this destination lists, rewritten on publish and compensation)
  and, once, `style.css`; the page is sanitised by `sanitise.sanitise_html`
  as a last line. Each write goes to a temp
  file in the same folder, is fsynced, then `os.replace`d.
- Idempotency: a receipt per key, `PATH/.pressroom/receipts/<key>.json`,
  written last. A key with a receipt answers with it and writes nothing.
- Status: the receipt file: present is `applied`, missing is `absent`.
- Compensation: before a page is overwritten its old `.md`/`.html` (or the
  fact there were none) are saved under `PATH/.pressroom/previous/<key>/`;
  compensating puts them back (or removes the page), updates the index and
  drops the receipt. It restores only while the page still holds this key's
  bytes, so undoing an older publish never erases a newer one. Compensating
  an absent key is a no-op.

Publishers of one folder are serialised by `flock` on `PATH/.pressroom/lock`.

Nothing is written through a symbolic link planted inside the folder: the
`.pressroom` folders must be real folders of PATH, and every file written
(page, index, receipt) must resolve inside PATH, checked before the first
write; otherwise the publish is `NotApplied` and nothing is written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import PublishedVersion, StatusAnswer
from sagas.destinations.files import (
    atomic_write,
    atomic_write_json,
    durable_unlink,
    exclusive_lock,
    read_json,
)
from sagas.destinations.site_render import STYLESHEET, STYLESHEET_NAME, render_index, render_page
from sagas.destinations.slugs import check_key, contained_path, slugify


class SiteDestination:
    """A `Destination` writing pages into one local folder."""

    form: ClassVar[str] = "site:PATH"

    def __init__(
        self, folder: Path | str, *, uri: str | None = None, link_hosts: frozenset[str] = frozenset()
    ) -> None:
        self.folder = Path(folder).expanduser()
        self.uri = uri or f"site:{folder}"
        self.link_hosts = link_hosts
        self._meta = self.folder / ".pressroom"

    @classmethod
    def check_target(cls, target: str) -> None:
        if not target.strip() or "\0" in target:
            raise InvalidInput("site: needs a folder path, as in site:PATH", target=target)

    @classmethod
    def open(
        cls, target: str, *, uri: str, timeout: float, link_hosts: frozenset[str] = frozenset()
    ) -> SiteDestination:
        cls.check_target(target)
        return cls(target, uri=uri, link_hosts=link_hosts)

    # -- the port -----------------------------------------------------------

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        check_key(key)
        self._prepare(key)
        with exclusive_lock(self._meta / "lock"):
            receipt_path = self._receipt_path(key)
            try:
                existing = read_json(receipt_path)
            except (OSError, ValueError) as exc:
                raise NotApplied(f"{self.uri}: unreadable receipt for {key}: {exc}", key=key) from exc
            if existing is not None:
                return existing
            slug = slugify(version.slug or version.title)
            self._check_targets(key, slug)
            data = version.markdown.encode("utf-8")
            sha = hashlib.sha256(data).hexdigest()
            try:
                self._save_previous(key, slug, sha)
            except OSError as exc:
                raise NotApplied(f"{self.uri}: cannot save the previous page: {exc}", key=key) from exc
            try:
                return self._apply(key, slug, sha, data, version.title)
            except OSError as exc:
                try:
                    self._undo(key)
                except OSError:
                    raise MaybeApplied(
                        f"{self.uri}: publish failed half-way and could not be undone: {exc}", key=key
                    ) from exc
                raise NotApplied(f"{self.uri}: publish failed and was undone: {exc}", key=key) from exc

    def status(self, key: str) -> StatusAnswer:
        check_key(key)
        try:
            receipt = read_json(self._receipt_path(key))
        except (OSError, ValueError) as exc:
            return StatusAnswer(kind="unknown", detail=f"unreadable receipt: {exc}")
        if receipt is None:
            return StatusAnswer(kind="absent")
        return StatusAnswer(kind="applied", receipt=receipt)

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        check_key(key)
        for folder in (self._meta, self._meta / "receipts", self._meta / "previous"):
            self._check_plain(key, folder)
        if not self._meta.is_dir():
            return  # nothing was ever published here
        try:
            with exclusive_lock(self._meta / "lock"):
                self._undo(key)
        except OSError as exc:
            raise MaybeApplied(f"{self.uri}: compensation of {key} may be partial: {exc}", key=key) from exc

    # -- steps ----------------------------------------------------------------

    def _prepare(self, key: str) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # Each bookkeeping folder is checked before anything is made inside it.
            for folder in (self._meta, self._meta / "receipts", self._meta / "previous"):
                self._check_plain(key, folder)
                folder.mkdir(exist_ok=True)
                self._check_plain(key, folder)
        except OSError as exc:
            raise NotApplied(
                f"{self.uri}: cannot use {self.folder} as a site folder: {exc}", key=key
            ) from exc

    def _check_plain(self, key: str, folder: Path) -> None:
        """`folder` is PATH's own (no link to somewhere else), when it exists."""
        root = self.folder.resolve()
        if folder.is_symlink() or (
            folder.exists() and folder.resolve() != root / folder.relative_to(self.folder)
        ):
            raise NotApplied(
                f"{self.uri}: {folder} is not a plain folder of {root}; nothing was written", key=key
            )

    def _check_targets(self, key: str, slug: str) -> None:
        """Every file this publish writes resolves inside PATH (a planted link is refused)."""
        try:
            self._page_paths(slug)
            contained_path(self.folder, "index.html")
            self._receipt_path(key)
        except InvalidInput as exc:
            raise NotApplied(f"{self.uri}: {exc}; nothing was written", key=key) from exc

    def _receipt_path(self, key: str) -> Path:
        return contained_path(self._meta / "receipts", f"{key}.json")

    def _page_paths(self, slug: str) -> tuple[Path, Path]:
        return contained_path(self.folder, f"{slug}.md"), contained_path(self.folder, f"{slug}.html")

    def _pages(self) -> dict[str, str]:
        stored = read_json(self._meta / "pages.json") or {}
        return {str(slug): str(title) for slug, title in stored.items()}

    def _write_pages(self, pages: dict[str, str]) -> None:
        atomic_write_json(self._meta / "pages.json", pages)
        atomic_write(contained_path(self.folder, "index.html"), render_index(pages).encode("utf-8"))
        stylesheet = contained_path(self.folder, STYLESHEET_NAME)
        if not stylesheet.exists():  # written once; a site's own edits to it are kept
            atomic_write(stylesheet, STYLESHEET.encode("utf-8"))

    def _save_previous(self, key: str, slug: str, sha: str) -> None:
        """Keep what the page was before this key touched it; the first save wins."""
        saved = contained_path(self._meta / "previous", key)
        if saved.exists():
            return  # an interrupted attempt already saved the true "before"
        md_path, html_path = self._page_paths(slug)
        staging = Path(tempfile.mkdtemp(dir=self._meta / "previous", prefix=".staging-"))
        try:
            for source, name in ((md_path, "page.md"), (html_path, "page.html")):
                if source.exists():
                    atomic_write(staging / name, source.read_bytes())
            state = {
                "key": key,
                "slug": slug,
                "sha256": sha,
                "had_md": md_path.exists(),
                "had_html": html_path.exists(),
                "title": self._pages().get(slug),
            }
            atomic_write_json(staging / "state.json", state)
            os.rename(staging, saved)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _apply(self, key: str, slug: str, sha: str, data: bytes, title: str) -> dict[str, Any]:
        md_path, html_path = self._page_paths(slug)
        atomic_write(md_path, data)
        page = render_page(title, data.decode("utf-8"), self.link_hosts)
        atomic_write(html_path, page.encode("utf-8"))
        pages = self._pages()
        pages[slug] = title
        self._write_pages(pages)
        receipt: dict[str, Any] = {
            "key": key,
            "path": str(md_path),
            "html": str(html_path),
            "sha256": sha,
            "slug": slug,
        }
        atomic_write_json(self._receipt_path(key), receipt)  # last: the receipt means "done"
        return receipt

    def _undo(self, key: str) -> None:
        """Put back what `key` replaced (if the page is still ours), then forget `key`."""
        saved = contained_path(self._meta / "previous", key)
        receipt_path = self._receipt_path(key)
        state = read_json(saved / "state.json")
        if state is None:
            receipt = read_json(receipt_path)
            if receipt is None:
                return
            state = {"slug": receipt["slug"], "sha256": receipt["sha256"], "had_md": False, "had_html": False}
        slug = slugify(str(state["slug"]))
        md_path, html_path = self._page_paths(slug)
        current = md_path.read_bytes() if md_path.exists() else None
        if current is not None and hashlib.sha256(current).hexdigest() == state["sha256"]:
            for path, name, had in ((md_path, "page.md", "had_md"), (html_path, "page.html", "had_html")):
                if state[had]:
                    atomic_write(path, (saved / name).read_bytes())
                else:
                    durable_unlink(path)
            pages = self._pages()
            if state.get("title") is not None:
                pages[slug] = str(state["title"])
            else:
                pages.pop(slug, None)
            self._write_pages(pages)
        durable_unlink(receipt_path)
        if saved.exists():
            shutil.rmtree(saved)


__all__ = ["SiteDestination", "render_index", "render_page"]

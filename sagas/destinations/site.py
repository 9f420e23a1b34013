"""`site:PATH`: a static site folder, one page per saga.

- URI: `site:PATH`; the folder is created if missing. A saga's page is
  `<slug>-<tag>.md` (bytes identical to the version's markdown, so its sha256
  is the version digest) and `<slug>-<tag>.html` (rendered by `site_render`:
  raw HTML escaped, citation markers linked to the Sources footnotes,
  sanitised by `sanitise.sanitise_html` as a last line). The tag is the start
  of the saga id, so sagas with one title never share a page; a saga keeps
  its name, and a later version replaces its own page (`site_names`).
  `index.html` lists every page published there now (from
  `.pressroom/pages.json`); `style.css` is written when there is none.
- Idempotency: a receipt per key, `PATH/.pressroom/receipts/<key>.json`,
  renamed into place last. A key with a receipt answers with it and writes
  nothing.
- Status: the receipt file: present is `applied`, missing is `absent`,
  unreadable or not a plain file is `unknown`.
- Compensation: before a page is replaced its old `.md`/`.html`, title and
  saga (or the fact there were none) are saved under
  `PATH/.pressroom/previous/<key>/`; compensating puts them back (or removes
  the page and its index line), then drops the receipt. It touches the page
  only while it still holds this key's bytes, so undoing an older version
  never erases a newer one, and it changes only its own page's line of the
  index, so another saga's page stays. Compensating an absent key is a no-op.

Publishers of one folder are serialised by `flock` on `PATH/.pressroom/lock`;
the bookkeeping's layout and the staged renames are `site_book`'s.

Pinning (`pinned`): each call opens PATH once, walking from `/` with
`O_DIRECTORY|O_NOFOLLOW` on every component, and, with
`PRESSROOM_ALLOWED_ROOTS` set, checks that descriptor against the roots by
identity (its `..` chain must pass through a root), again just before the
first rename. Every read, write and removal after that is relative to it
(`dir_fd=`). A symbolic link (or a hard link, FIFO or other non-plain file)
where the site's own file or folder is expected — `.pressroom/` and its
folders, the lock, `pages.json`, a receipt, the saved previous page, the
page's `.md`/`.html`, `index.html` — is never followed: the step is refused
(`NotApplied`) before anything is live. A `style.css` that exists in any form,
a dangling link included, is the site's own: left as it is, never opened.
A page name that a file of the site's own already uses is passed over for a
longer tag; a link at the name the saga's page would take refuses the step.

A step writes all its files to fresh temporary names first (`O_EXCL`) and
renames them into place last, page first and receipt last; a failure before
the renames leaves nothing live, one during them is undone from the saved
previous page (`MaybeApplied` only when that undo fails too).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import OpenOptions, PublishedVersion, StatusAnswer
from sagas.destinations.pinned import Folder, Unsafe, root_ids
from sagas.destinations.site_book import INDEX, Book, Staged, load, open_book
from sagas.destinations.site_names import Entry, is_page_name, page_name
from sagas.destinations.site_render import STYLESHEET, STYLESHEET_NAME, render_index, render_page
from sagas.destinations.slugs import check_key, slugify

if TYPE_CHECKING:
    from orchestrator.core.config import Settings


class SiteDestination:
    """A `Destination` writing pages into one local folder."""

    form: ClassVar[str] = "site:PATH"
    file_based: ClassVar[bool] = True
    reversible: ClassVar[bool] = True
    test_only: ClassVar[bool] = False

    def __init__(
        self,
        folder: Path | str,
        *,
        uri: str | None = None,
        link_hosts: frozenset[str] = frozenset(),
        roots: Sequence[Path] = (),
    ) -> None:
        self.folder = Path(folder).expanduser()
        self.uri = uri or f"site:{folder}"
        self.link_hosts = link_hosts
        self.roots = tuple(roots)

    @classmethod
    def check_target(cls, target: str) -> None:
        if not target.strip() or "\0" in target:
            raise InvalidInput("site: needs a folder path, as in site:PATH", target=target)

    @classmethod
    def canonical(cls, target: str) -> str:
        return target

    @classmethod
    def check_at_submit(cls, target: str, settings: Settings) -> None:
        """Nothing beyond the roots, which the caller checks for every file-based kind."""

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float, options: OpenOptions) -> SiteDestination:
        cls.check_target(target)
        return cls(target, uri=uri, link_hosts=options.link_hosts, roots=options.roots)

    # -- the port -----------------------------------------------------------

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        check_key(key)
        try:
            book = open_book(self.folder, self.roots, create=True)
            assert book is not None  # made when missing
        except Unsafe as exc:
            raise NotApplied(f"{self.uri}: {exc}; nothing was written", key=key) from exc
        except OSError as exc:
            raise NotApplied(
                f"{self.uri}: cannot use {self.folder} as a site folder: {exc}", key=key
            ) from exc
        with book:
            try:
                with book.meta.lock("lock"):
                    return self._publish(book, key, version)
            except Unsafe as exc:
                raise NotApplied(f"{self.uri}: {exc}; nothing was written", key=key) from exc

    def status(self, key: str) -> StatusAnswer:
        check_key(key)
        try:
            book = open_book(self.folder, self.roots, create=False)
            if book is None:
                return StatusAnswer(kind="absent")
            with book:
                receipt = book.receipt(key)
        except (OSError, ValueError, Unsafe) as exc:
            return StatusAnswer(kind="unknown", detail=f"unreadable receipt: {exc}")
        if receipt is None:
            return StatusAnswer(kind="absent")
        return StatusAnswer(kind="applied", receipt=receipt)

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        check_key(key)
        try:
            book = open_book(self.folder, self.roots, create=False)
        except (OSError, Unsafe) as exc:
            raise NotApplied(f"{self.uri}: cannot undo {key}: {exc}; nothing was undone", key=key) from exc
        if book is None:
            return  # nothing was ever published here
        with book:
            try:
                with book.meta.lock("lock"):
                    self._undo(book, key)
            except Unsafe as exc:
                raise NotApplied(f"{self.uri}: {exc}; nothing was undone", key=key) from exc
            except (OSError, ValueError) as exc:
                raise MaybeApplied(
                    f"{self.uri}: compensation of {key} may be partial: {exc}", key=key
                ) from exc

    # -- steps ----------------------------------------------------------------

    def _publish(self, book: Book, key: str, version: PublishedVersion) -> dict[str, Any]:
        staged: Staged = []
        made_previous = False
        try:
            existing = book.receipt(key)
            if existing is not None:
                return existing
            pages = book.pages()
            saved = book.saved_state(key)  # an interrupted attempt saved the true "before"
            slug = slugify(version.slug or version.title)
            name = (
                _name_of(saved)
                if saved is not None
                else page_name(slug, version.saga_id, pages, lambda n: _in_use(book.site, n))
            )
            md, html = f"{name}.md", f"{name}.html"
            for target in (md, html, INDEX):
                _plain_or_absent(book.site, target)
            data = version.markdown.encode("utf-8")
            sha = hashlib.sha256(data).hexdigest()
            if saved is None:
                book.save_previous(key, name, sha, pages.get(name))
                made_previous = True
            page = render_page(version.title, version.markdown, self.link_hosts)
            receipt: dict[str, Any] = {
                "key": key,
                "path": book.site.shown(md),
                "html": book.site.shown(html),
                "sha256": sha,
                "slug": slug,
                "page": name,
            }
            staged.append((book.site, book.site.stage(md, data), md))
            staged.append((book.site, book.site.stage(html, page.encode("utf-8")), html))
            if book.site.kind(STYLESHEET_NAME) == "absent":  # a site's own stylesheet is kept
                stylesheet = book.site.stage(STYLESHEET_NAME, STYLESHEET.encode("utf-8"))
                staged.append((book.site, stylesheet, STYLESHEET_NAME))
            staged += book.stage_listing({**pages, name: Entry(version.title, version.saga_id)})
            staged += book.stage_receipt(key, receipt)  # renamed in last: the receipt means "done"
            self._still_inside(book)
        except BaseException as exc:
            book.discard(staged)
            if made_previous:
                book.previous.remove_tree(key)
            if isinstance(exc, OSError | ValueError):
                raise NotApplied(
                    f"{self.uri}: publish of {key} failed before anything was live: {exc}", key=key
                ) from exc
            raise
        try:
            book.commit(staged)
        except OSError as exc:
            book.discard(staged)
            try:
                self._undo(book, key)
            except (OSError, ValueError, Unsafe):
                raise MaybeApplied(
                    f"{self.uri}: publish failed half-way and could not be undone: {exc}", key=key
                ) from exc
            raise NotApplied(f"{self.uri}: publish failed and was undone: {exc}", key=key) from exc
        return receipt

    def _undo(self, book: Book, key: str) -> None:
        """Put back what `key` replaced (if the page is still its own), then forget `key`."""
        saved = book.previous.sub(key)
        try:
            state = load(saved, "state.json")
            if state is None:
                receipt = book.receipt(key)
                if receipt is None:
                    if saved is not None:
                        book.previous.remove_tree(key)  # a save cut short: nothing was published
                    return
                page = receipt.get("page") or receipt["slug"]
                state = {"name": page, "sha256": receipt["sha256"], "had_md": False, "had_html": False}
            name = _name_of(state)
            current = book.site.read(f"{name}.md")
            if current is not None and hashlib.sha256(current).hexdigest() == state["sha256"]:
                book.restore(saved, name, state)
        finally:
            if saved is not None:
                saved.close()
        book.forget(key)

    def _still_inside(self, book: Book) -> None:
        """The folder still lies in the roots, checked by its descriptor just before the renames."""
        if self.roots and not book.site.inside(root_ids(self.roots)):
            raise Unsafe(f"{self.folder} was moved outside the allowed roots (PRESSROOM_ALLOWED_ROOTS)")


def _name_of(state: dict[str, Any]) -> str:
    name = state.get("name") or state.get("slug")  # `slug`: saved by an earlier release
    if not isinstance(name, str) or not is_page_name(name):
        raise Unsafe(f"the saved state names no page of the site: {name!r}")
    return name


def _in_use(site: Folder, name: str) -> bool:
    """Whether a file of the site's own uses `name`; a link there is no reason to move
    aside: the name is taken, and the step refused by `_plain_or_absent`."""
    return any(site.kind(f"{name}{ext}") not in ("absent", "link") for ext in (".md", ".html"))


def _plain_or_absent(site: Folder, name: str) -> None:
    kind = site.kind(name)
    if kind not in ("absent", "file"):
        raise Unsafe(f"{site.shown(name)} is a {kind}, not a plain file of the site; it was not followed")


__all__ = ["SiteDestination", "render_index", "render_page"]

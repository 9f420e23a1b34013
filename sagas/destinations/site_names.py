"""Which file a saga's page gets in a `site:` folder, and the folder's list of pages.

A page is named `<slug>-<tag>` (`.md` and `.html`), where the slug comes from
the title and the tag is the start of the saga id (the same 8 hex digits
`pressroom status` accepts as a prefix), so sagas with one title get one page
each. A saga keeps the name its first publish got: a later version of it
replaces its own page, even when its title changed. A name another saga
holds, or that any file of the folder already uses, is passed over for a
longer tag.

`pages.json` maps each page name to its title and saga; the listing of
earlier releases (name -> title) is still read.

Pure: no I/O (whether a name is in use is asked through `in_use`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

TAG_LENGTHS = (8, 12, 16, 64)
_HEX_ID = re.compile(r"[0-9a-f]{8,64}")
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
NAME_MAX_LENGTH = 160  # a slug (64) + "-" + a tag (64), with room: far under the 255-byte limit


@dataclass(frozen=True)
class Entry:
    """One page the folder lists: its title and the saga it belongs to (None: an older release's)."""

    title: str
    saga_id: str | None = None


class NoFreeName(ValueError):
    """Every name this saga could take is in use."""


def saga_tag(saga_id: str, length: int) -> str:
    """The first `length` hex digits of the saga id (of its sha256 when it is not hex)."""
    source = saga_id if _HEX_ID.fullmatch(saga_id) else hashlib.sha256(saga_id.encode("utf-8")).hexdigest()
    return source[:length]


def is_page_name(name: str) -> bool:
    """Whether `name` could be a page's name (so it names no other file, and never a path)."""
    return len(name) <= NAME_MAX_LENGTH and _NAME.fullmatch(name) is not None


def page_name(slug: str, saga_id: str, pages: Mapping[str, Entry], in_use: Callable[[str], bool]) -> str:
    """The name of `saga_id`'s page: the one it holds here already, else the first free one.

    `slug` must be a slug (`slugs.slugify`); `in_use(name)` says whether a file of
    the folder already uses `name` (as `.md` or `.html`).
    """
    for name, entry in sorted(pages.items()):
        if entry.saga_id == saga_id:
            return name
    for length in TAG_LENGTHS:
        name = f"{slug}-{saga_tag(saga_id, length)}"
        if name not in pages and not in_use(name):
            return name
    raise NoFreeName(f"every page name for {slug!r} is taken")


def parse_pages(raw: Mapping[str, Any]) -> dict[str, Entry]:
    """The listing stored in `pages.json`: `{name: {"title", "saga_id"}}` or, from earlier
    releases, `{name: title}`. Names that could not be a page are dropped."""
    pages: dict[str, Entry] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not is_page_name(name):
            continue
        if isinstance(value, str):
            pages[name] = Entry(title=value)
        elif isinstance(value, dict) and isinstance(value.get("title"), str):
            saga = value.get("saga_id")
            pages[name] = Entry(title=value["title"], saga_id=saga if isinstance(saga, str) else None)
    return pages


def dump_pages(pages: Mapping[str, Entry]) -> dict[str, Any]:
    return {name: {"title": e.title, "saga_id": e.saga_id} for name, e in sorted(pages.items())}


def titles(pages: Mapping[str, Entry]) -> dict[str, str]:
    """Name -> title, what the index lists."""
    return {name: entry.title for name, entry in pages.items()}


__all__ = [
    "TAG_LENGTHS",
    "Entry",
    "NoFreeName",
    "dump_pages",
    "is_page_name",
    "page_name",
    "parse_pages",
    "saga_tag",
    "titles",
]

"""One folder reached through a descriptor opened once: the `site:` destination's file I/O.

Owns how a site folder is reached and touched, and nothing else:

- `pin_folder(path, roots, create=...)` opens the folder by walking its
  resolved path from `/`, one component at a time, each opened with
  `O_DIRECTORY|O_NOFOLLOW` relative to the one before (missing components
  are made with `mkdir(dir_fd=)`, only once the part that exists is known to
  lie in the roots). The resolved path only names the components to walk: a
  component swapped for a link meanwhile fails the walk (`ELOOP`), it is
  never followed. With allowed roots, the descriptor is then checked against
  them by identity: its chain of `..` folders, walked up to `/`, must pass
  through a root's `(st_dev, st_ino)` (`Folder.inside`).
- `Folder` works only relative to its descriptor (`dir_fd=`): sub-folders
  opened with `O_NOFOLLOW`; files read with `O_NOFOLLOW|O_NONBLOCK` and only
  when they are regular files with one link (a symbolic link, a hard link to
  a file elsewhere, a FIFO or a device is `Unsafe`, never read); new data
  written to a fresh temporary name (`O_CREAT|O_EXCL|O_NOFOLLOW`, fsynced)
  and renamed into place with `os.rename(src_dir_fd=, dst_dir_fd=)`, which
  replaces a name and never writes through what was there.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from sagas.destinations.files import PUBLIC_FILE_MODE

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_LOCK = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_DEPTH = 256  # folders above a site folder; a deeper chain is refused, not walked for ever
MAX_READ = 64 * 1024 * 1024  # a page or a bookkeeping file larger than this is not a site's own

FileId = tuple[int, int]
Kind = Literal["absent", "file", "link", "folder", "other"]


class Unsafe(Exception):
    """A link, a foreign file or a folder outside the roots where the site's own was expected.

    Nothing was read, written or followed through it."""


def _id(st: os.stat_result) -> FileId:
    return (st.st_dev, st.st_ino)


def _open_dir(name: str, parent: int, shown: str) -> int:
    """`name` in `parent`, opened as a folder without following a link."""
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                    raise Unsafe(f"{shown} is a symbolic link, not a plain folder") from exc
        raise


def _walk(real: str, roots: list[FileId] | None, create: bool) -> int:
    """The descriptor of `real` (absolute, resolved), every component opened with O_NOFOLLOW."""
    fd = os.open("/", _DIR)
    try:
        shown = ""
        checked = roots is None
        for part in [p for p in real.split("/") if p]:
            shown += "/" + part
            try:
                child = _open_dir(part, fd, shown)
            except FileNotFoundError:
                if not create:
                    raise
                if not checked and not inside(fd, roots or []):
                    raise Unsafe(f"{shown} would be made outside the allowed roots") from None
                checked = True
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = _open_dir(part, fd, shown)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def ancestry(fd: int) -> list[FileId]:
    """The identities of the folder `fd` and of each folder above it now, up to `/`."""
    ids: list[FileId] = []
    current = os.dup(fd)
    try:
        for _ in range(MAX_DEPTH):
            here = _id(os.fstat(current))
            ids.append(here)
            parent = os.open("..", _DIR, dir_fd=current)
            os.close(current)
            current = parent
            if _id(os.fstat(current)) == here:  # `/` is its own parent
                return ids
    finally:
        os.close(current)
    raise Unsafe(f"the folder lies more than {MAX_DEPTH} folders deep")


def inside(fd: int, roots: Sequence[FileId]) -> bool:
    """Whether the folder `fd` lies, now, in one of the folders `roots` (or is one)."""
    return bool(set(ancestry(fd)) & set(roots))


def root_ids(roots: Sequence[Path]) -> list[FileId]:
    """The identities of the allowed roots that exist (each reached like a site folder)."""
    ids: list[FileId] = []
    for root in roots:
        try:
            fd = _walk(os.path.realpath(root), None, create=False)
        except (OSError, Unsafe):
            continue  # a root that is not there holds nothing
        try:
            ids.append(_id(os.fstat(fd)))
        finally:
            os.close(fd)
    return ids


def pin_folder(path: Path, roots: Sequence[Path] | None, *, create: bool) -> Folder:
    """`path` opened once, and (with `roots`) checked by its descriptor to lie in them.

    `FileNotFoundError` when it is missing and `create` is false; `Unsafe` when a
    component is a link at the moment it is opened or the folder lies outside the roots.
    """
    real = os.path.realpath(path)
    allowed = root_ids(roots) if roots else None
    fd = _walk(real, allowed, create)
    folder = Folder(fd, real)
    if allowed is not None and not folder.inside(allowed):
        folder.close()
        raise Unsafe(f"{path} lies outside the allowed roots (PRESSROOM_ALLOWED_ROOTS)")
    return folder


class Folder:
    """An open folder; every name below is one entry of it, never a path."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path  # for messages and receipts only: never opened again by name

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def shown(self, name: str) -> str:
        return f"{self.path}/{name}"

    def inside(self, roots: Sequence[FileId]) -> bool:
        return inside(self.fd, roots)

    def kind(self, name: str) -> Kind:
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return "absent"
        if stat.S_ISLNK(mode):
            return "link"
        if stat.S_ISDIR(mode):
            return "folder"
        return "file" if stat.S_ISREG(mode) else "other"

    def sub(self, name: str, *, create: bool = False) -> Folder | None:
        """The plain folder `name` here (made when `create`), or None when it is missing."""
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=self.fd)
        try:
            fd = _open_dir(name, self.fd, self.shown(name))
        except FileNotFoundError:
            return None
        except NotADirectoryError as exc:
            raise Unsafe(f"{self.shown(name)} is not a plain folder") from exc
        return Folder(fd, self.shown(name))

    def read(self, name: str) -> bytes | None:
        """The bytes of the regular file `name`, or None when there is none."""
        try:
            fd = os.open(name, _READ, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Unsafe(f"{self.shown(name)} is a symbolic link; it was not read") from exc
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > MAX_READ:
                raise Unsafe(f"{self.shown(name)} is not a plain file of the site; it was not read")
            chunks: list[bytes] = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def stage(self, name: str, data: bytes) -> str:
        """`data` in a new temporary file beside `name`, synced; its name is returned."""
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(temp, _NEW, 0o600, dir_fd=self.fd)
        try:
            os.fchmod(fd, PUBLIC_FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.unlink(temp)
            raise
        os.close(fd)
        return temp

    def move(self, src: str, dst: str, into: Folder | None = None) -> None:
        """Rename `src` here to `dst` in `into` (here by default); a link at `dst` is replaced."""
        os.rename(src, dst, src_dir_fd=self.fd, dst_dir_fd=(into or self).fd)

    def unlink(self, name: str) -> None:
        """Remove the entry `name` (a link is removed, not followed); no error when missing."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def make_dir(self, name: str) -> None:
        os.mkdir(name, 0o755, dir_fd=self.fd)

    def remove_tree(self, name: str) -> None:
        """Remove the folder `name` and what it holds; links inside are removed, never followed."""
        if self.kind(name) == "folder":
            shutil.rmtree(name, dir_fd=self.fd)
        else:
            self.unlink(name)

    def sync(self) -> None:
        os.fsync(self.fd)

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Hold an exclusive `flock` on the plain file `name` here (made if missing)."""
        try:
            fd = os.open(name, _LOCK, 0o644, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Unsafe(f"{self.shown(name)} is a symbolic link, not the site's lock") from exc
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Unsafe(f"{self.shown(name)} is not a plain file of the site")
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock


__all__ = ["Folder", "Unsafe", "ancestry", "inside", "pin_folder", "root_ids"]

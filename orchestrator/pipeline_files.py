"""Pipeline files: the ones the project ships (`roles/pipelines/`) and the ones
in `PRESSROOM_PIPELINES_DIR`, which take the place of a shipped file of the
same name. A pipeline's name is its file's stem.

The name comes from a caller (`submit --pipeline NAME`, the HTTP API, MCP),
so it must match `NAME` before it is joined to a folder: no separator, no
dot, nothing a path could climb with. A file is read once, bounded in size,
and parsed against the role kinds registered in this process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput, NotFound
from orchestrator.core.pipeline import NAME, InvalidPipeline, Pipeline, parse_pipeline
from roles import builtin_kinds
from roles.kinds import kind_infos

SHIPPED = Path(builtin_kinds.__file__).resolve().parent / "pipelines"
DEFAULT = "default"
MAX_BYTES = 64 * 1024
_NAME = re.compile(NAME)


@dataclass(frozen=True)
class Found:
    name: str
    path: Path


def folders(settings: Settings) -> tuple[Path, ...]:
    """Where pipelines are looked for, the first that holds a name winning."""
    if settings.pipelines_dir is None:
        return (SHIPPED,)
    return (settings.pipelines_dir.expanduser(), SHIPPED)


def available(settings: Settings) -> list[Found]:
    """Every pipeline by name (sorted), each from the folder that wins for it."""
    found: dict[str, Found] = {}
    for folder in folders(settings):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            if _NAME.match(path.stem) and path.stem not in found:
                found[path.stem] = Found(path.stem, path)
    return [found[name] for name in sorted(found)]


def load(settings: Settings, name: str | None = None) -> Pipeline:
    """The pipeline `name` (the default when None), parsed and checked."""
    name = DEFAULT if name is None else name
    if not _NAME.match(name):
        raise InvalidInput(f"not a pipeline name: {name[:60]!r} (lower-case letters, digits, '-' and '_')")
    for folder in folders(settings):
        path = folder / f"{name}.toml"
        if path.is_file():
            return parse_file(name, path)
    raise NotFound(f"no pipeline {name!r} (see `pressroom pipelines list`)")


def parse_file(name: str, path: Path) -> Pipeline:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InvalidPipeline(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise InvalidPipeline(f"{path}: larger than {MAX_BYTES // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidPipeline(f"{path}: not UTF-8") from None
    return parse_pipeline(name, text, source=str(path), kinds=kind_infos())


__all__ = ["DEFAULT", "SHIPPED", "Found", "available", "folders", "load", "parse_file"]

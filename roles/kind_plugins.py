"""Role kinds from other packages: the `pressroom.role_kinds` entry points.

Each entry point names a module whose import registers its kind
(`roles.kinds.register`), so adding a kind is one module and one line in its
package's metadata:

    [project.entry-points."pressroom.role_kinds"]
    factcheck = "my_package.factcheck"

`load_kinds()` registers the built-in kinds, then imports every such module
once per `sys.path` (a path added later may bring new distributions). A module
that fails to import is logged and left out: the pipelines that name its kind
are refused as naming an unknown kind.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points

from roles import builtin_kinds  # noqa: F401  (imported for its registrations)
from roles.kinds import RoleKind, kinds

GROUP = "pressroom.role_kinds"
log = logging.getLogger(__name__)
_loaded_for: tuple[str, ...] | None = None


def load_kinds() -> Mapping[str, RoleKind]:
    """Every registered role kind, the built-in ones and the entry points' ones."""
    global _loaded_for
    searched = tuple(sys.path)
    if searched != _loaded_for:
        for point in entry_points(group=GROUP):
            try:
                importlib.import_module(point.value.partition(":")[0])
            except Exception as exc:  # a broken plugin must not stop the rest
                log.error(
                    "role kind %s (%s) not loaded: %s: %s", point.name, point.value, type(exc).__name__, exc
                )
        _loaded_for = searched
    return kinds()


__all__ = ["GROUP", "load_kinds"]

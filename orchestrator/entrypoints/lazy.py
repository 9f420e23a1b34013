"""Modules loaded on first use, so `pressroom --help` starts without the database,
broker and tracing stacks (`importlib.util.LazyLoader`, the standard library's recipe).

A module named here is registered in `sys.modules` at once and executed when one
of its attributes is first read; a later plain import gets the same module.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name`, imported when one of its attributes is first used."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


__all__ = ["lazy_module"]

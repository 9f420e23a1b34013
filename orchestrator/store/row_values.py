"""Small helpers the harness store's statements share: bound INSERT values, aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, bindparam


def bound(table: Table, names: tuple[str, ...], prefix: str) -> dict[str, Any]:
    """`names` of `table`, each bound as `prefix` + name: an INSERT's values that can share
    a statement with other INSERTs (`write_intent`) without their parameters meeting."""
    return {name: bindparam(prefix + name, type_=table.c[name].type) for name in names}


def aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


__all__ = ["aware", "bound"]

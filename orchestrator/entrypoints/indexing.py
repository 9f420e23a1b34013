"""`pressroom index CORPUS_DIR [--json]`: build or refresh a corpus index ahead of time.

`--json` prints ``corpus`` (the resolved folder), ``added``, ``changed`` and
``removed`` (lists of corpus-relative paths), ``unchanged`` (a count),
``skipped`` (``path`` and ``reason`` of each file that cannot be used) and
``files_read`` (how many files this refresh read).
"""

from __future__ import annotations

from typing import Any

import click


def _human(out: dict[str, Any]) -> None:
    click.echo(
        f"indexed {out['corpus']}: {len(out['added'])} added, {len(out['changed'])} changed, "
        f"{len(out['removed'])} removed, {out['unchanged']} unchanged"
        f" ({len(out['skipped'])} skipped, {out['files_read']} read)"
    )
    for label in ("added", "changed", "removed"):
        for path in out[label]:
            click.echo(f"  {label:<8} {path}")
    for skipped in out["skipped"]:
        click.echo(f"  skipped  {skipped['path']}: {skipped['reason']}")


def register(cli: click.Group, pass_ctx: Any, emit: Any) -> None:
    @cli.command(name="index")
    @click.argument("corpus_dir")
    @click.option("--json", "as_json", is_flag=True)
    @pass_ctx  # type: ignore[untyped-decorator]
    def index(ctx: Any, corpus_dir: str, as_json: bool) -> None:
        """Build or refresh the corpus index: files added / changed / removed."""

        emit(ctx.app().submissions.index_corpus(corpus_dir), as_json, _human)


__all__ = ["register"]

"""The run's four destinations per saga, and each one's own record of what it applied and undid.

- `site:RUN/site`: a folder; its record is the receipts a watcher journals
  (chaos/site_watch.py).
- `git:RUN/repo`: a repository that does not exist before the first publish
  (so the first publishes race to create it); its record is its history
  (chaos/git_record.py), read when asked.
- `webhook:` A and B: two of the suite's webhook servers (chaos/webhook.py),
  each with a journal of its own.

`is_live` answers "does the destination hold this key now" as the operator
asks it before reconciling; `record` gathers every destination's effects (in
each destination's own order) and what is live at the end, for the checker.
"""

from __future__ import annotations

import json
from pathlib import Path

from chaos import git_record
from chaos.checker import Effect
from chaos.cluster import free_port
from chaos.site_watch import SiteWatch
from chaos.webhook import ChaosWebhook

HOOK_NAMES = ("hook-a", "hook-b")


class Destinations:
    def __init__(self, run_dir: Path, *, stall_seconds: float) -> None:
        self.dir = run_dir
        self.site = run_dir / "site"
        self.repo = run_dir / "repo"
        self.watch = SiteWatch(self.site, run_dir / "site-journal.jsonl")
        self.hooks = {
            name: ChaosWebhook(
                free_port(), run_dir / f"webhook-{name}-journal.jsonl", stall_seconds=stall_seconds, name=name
            )
            for name in HOOK_NAMES
        }
        self.site_uri = f"site:{self.site}"
        self.git_uri = f"git:{self.repo}"
        self.hook_uris = {f"webhook:{hook.url}": hook for hook in self.hooks.values()}

    @property
    def uris(self) -> list[str]:
        return [self.site_uri, self.git_uri, *self.hook_uris]

    def start(self) -> None:
        for hook in self.hooks.values():
            hook.start()
        self.watch.start()

    def stop(self) -> None:
        self.watch.stop()
        for hook in self.hooks.values():
            hook.stop()

    def other_hook(self, name: str) -> ChaosWebhook:
        return next(h for n, h in self.hooks.items() if n != name)

    def is_live(self, uri: str, key: str) -> bool:
        if uri in self.hook_uris:
            return self.hook_uris[uri].is_applied(key)
        if uri == self.site_uri:
            return self.watch.is_applied(key)
        if uri == self.git_uri:
            return key in git_record.replay(uri, git_record.read(self.repo))[1]
        raise KeyError(f"not a destination of this run: {uri}")

    def record(self) -> tuple[tuple[Effect, ...], dict[tuple[str, str], str | None]]:
        """(every destination's effects, (uri, key) -> digest live at the end)."""
        effects: list[Effect] = []
        live: dict[tuple[str, str], str | None] = {}
        for uri, hook in self.hook_uris.items():
            effects += [
                Effect(uri, e["kind"], e["key"], e["saga_id"], e["version_digest"]) for e in hook.events
            ]
            live.update({(uri, k): b.get("version_digest") for k, b in hook.applied_now.items()})
        effects += [
            Effect(self.site_uri, e["kind"], e["key"], None, e["version_digest"]) for e in self.watch.events
        ]
        live.update({(self.site_uri, k): d for k, d in self.watch.live().items()})
        commits = git_record.read(self.repo)
        with (self.dir / "git-record.jsonl").open("w", encoding="utf-8") as fh:
            for c in commits:
                fh.write(json.dumps(c.__dict__) + "\n")
        git_effects, git_live = git_record.replay(self.git_uri, commits)
        effects += git_effects
        live.update({(self.git_uri, k): d for k, d in git_live.items()})
        return tuple(effects), live

    def requests(self) -> dict[str, dict[str, int]]:
        return {name: dict(sorted(hook.requests.items())) for name, hook in self.hooks.items()}


__all__ = ["HOOK_NAMES", "Destinations"]

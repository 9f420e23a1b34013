"""Use cases for reviewers' line comments: leave one on the head version, list a version's.

Leaving a comment needs the `reject` permission (the `reviewer` role in closed
mode; a typed name in open mode, recorded unverified, as every open-mode act).
Only the head version takes comments; once a new version supersedes it, its
comments stay visible and read-only (`StaleVersion`: exit 4 / HTTP 409).
The rules on the text and the line are `comment_notes` (pure); the table and
its `comment` event are `store.comments`; a rejection passes the head
version's comments to the writer (`services.Reviews.reject`).
"""

from __future__ import annotations

from typing import Any

from orchestrator.comment_notes import checked_line, checked_text
from orchestrator.core.errors import StaleVersion
from orchestrator.harness.principals import Permission, Principal, acting
from orchestrator.people import permitted
from orchestrator.ports import Sessions, Transact
from orchestrator.store import comments as store
from orchestrator.store.people import PeopleStore
from sagas import records


class Comments:
    """Line comments in units of work from `transact`; `people` says who may leave one."""

    def __init__(self, transact: Transact, sessions: Sessions, people: PeopleStore) -> None:
        self._transact = transact
        self._sessions = sessions
        self._people = people

    def leave(
        self, saga_id: str, *, version: int, line: int, text: str, actor: Principal | str
    ) -> dict[str, Any]:
        """Record a comment on `line` of `version`, which must be the saga's head; the comment."""
        who = permitted(self._people, actor, Permission.REJECT)
        body = checked_text(text)
        with acting(who), self._transact() as uow:
            s = uow.session
            saga = records.find_saga(s, saga_id, lock=True)
            row = records.version(s, saga.id, version)
            if saga.head_version != row.number:
                raise StaleVersion(
                    f"version {row.number} is no longer the head (v{saga.head_version}); "
                    "its comments are read-only"
                )
            checked_line(line, row.markdown, row.number)
            comment = store.add_comment(
                s,
                saga_id=saga.id,
                version=row.number,
                line=line,
                text=body,
                author=who.display,
                author_id=who.id if who.verified else None,
            )
            out = {"saga_id": saga.id, **store.as_dict(comment)}
        return out

    def on_version(self, saga_id: str, version: int) -> list[dict[str, Any]]:
        """The comments on one version, by line."""
        with self._sessions() as s:
            return store.comments_on(s, saga_id, version)


__all__ = ["Comments"]

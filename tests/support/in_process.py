"""Set up a console-script test's database in this process: people, sagas.

An e2e test that is about a page, an audit or a refusal still needs users and
sagas first. Made by `pressroom users add` and `pressroom submit`, each costs a
cold start of the console script (seconds on a busy machine) and tests nothing
the people and CLI tests do not. Here the same use cases run in the test's own
process, through `build_app` with the settings the console script would read
from the test's environment, on the same database: the processes the test
starts next find the rows as if the commands had made them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from orchestrator import people
from orchestrator.bootstrap import build_app
from orchestrator.core.config import Settings
from orchestrator.pressroom import Pressroom

EVERY_ROLE = ("admin", "author", "reviewer", "operator")


@contextmanager
def app_for(env: Mapping[str, str], cwd: Path) -> Iterator[Pressroom]:
    """The app `pressroom` would build from `env` when run in `cwd`."""
    values: dict[str, object] = {
        k.removeprefix("PRESSROOM_").lower(): v for k, v in env.items() if k.startswith("PRESSROOM_")
    }
    values.setdefault("secret_file", cwd / ".pressroom-secret")  # the console script's is cwd-relative
    app = build_app(Settings(**values))  # type: ignore[arg-type]  # strings, parsed as from the environment
    try:
        yield app
    finally:
        app.close()


def add_people(
    env: Mapping[str, str],
    cwd: Path,
    others: Mapping[str, Sequence[str]],
    *,
    admin_roles: Sequence[str] = EVERY_ROLE,
) -> dict[str, str]:
    """`admin` with `admin_roles` (the first user), then `others` by name with their roles,
    added by that admin; each one's token, by name."""
    with app_for(env, cwd) as app:
        first = people.add_user(app.people, None, "admin", admin_roles)
        tokens = {"admin": first.token}
        admin = people.resolve(app.people, token=first.token, claimed=None)
        for name, roles in others.items():
            tokens[name] = people.add_user(app.people, admin, name, roles).token
    return tokens


def submit(
    env: Mapping[str, str],
    cwd: Path,
    *,
    brief: str,
    corpus: Path,
    destinations: Sequence[str],
    token: str | None = None,
    actor: str | None = None,
) -> str:
    """A saga submitted by the holder of `token` (closed mode) or by `actor` (open mode); its id."""
    with app_for(env, cwd) as app:
        who = people.resolve(app.people, token=token, claimed=actor)
        out = app.submissions.submit(
            brief=brief, corpus=str(corpus), destinations=list(destinations), actor=who
        )
    return str(out["saga_id"])


def approve(
    env: Mapping[str, str],
    cwd: Path,
    saga_id: str,
    *,
    version: int,
    token: str | None = None,
    actor: str | None = None,
) -> dict[str, object]:
    """`version` of the saga approved (and, with the inline broker, published) as `pressroom
    approve` would: by the holder of `token`, or by `actor` in open mode."""
    with app_for(env, cwd) as app:
        who = people.resolve(app.people, token=token, claimed=actor)
        return app.reviews.approve(saga_id, version=version, actor=who)

"""A real `pressroom serve` process on a free loopback port, and an HTML tag census.

`served(env, log_dir)` starts the console script, waits until it answers,
yields its base URL and always stops it. `tags(page)` lists the start tags an
HTML parser (the standard library's, as lenient as a browser's tokenizer)
finds in a page, so a test can say which elements and attributes a page
really has instead of searching its text.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx

from tests.conftest import SAMPLE_CORPUS, Cli, base_env
from tests.support.processes import PRESSROOM, Proc, wait_until

BRIEF = "The history of the Millbrook library branches and the bookmobile"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/sign-in", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def served(env: dict[str, str], log_dir: Path, name: str = "serve") -> Iterator[str]:
    """`pressroom serve` on 127.0.0.1:<free port>; yields `http://127.0.0.1:<port>`."""
    port = free_port()
    proc = Proc(name, [PRESSROOM, "serve", "--port", str(port)], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.popen.poll() is not None or _answers(url), timeout=60, what="pressroom serve")
        assert proc.popen.poll() is None, f"serve exited:\n{proc.output()}"
        yield url
    finally:
        proc.stop()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def tags(page: str) -> list[tuple[str, dict[str, str]]]:
    """Every start tag in `page`, as (name, attributes)."""
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser.found


def form_token(page: str, action: str | None = None) -> str:
    """The `form_token` of the first form on `page` (posting to `action`, when given)."""
    current: str | None = None
    for tag, attrs in tags(page):
        if tag == "form":
            current = attrs.get("action")
        elif tag == "input" and attrs.get("name") == "form_token" and (action is None or current == action):
            return attrs.get("value", "")
    raise AssertionError(f"no form_token for {action or 'any form'} on the page")


def field_names(page: str) -> set[str]:
    """The names of every input on the page."""
    return {attrs["name"] for tag, attrs in tags(page) if tag == "input" and "name" in attrs}


def people_and_a_saga(tmp_path: Path, **settings: str) -> tuple[dict[str, str], Cli, dict[str, str], str]:
    """Closed mode on a fresh SQLite file: admin, rita (reviewer), sam (author and
    reviewer, who submits a saga), otto (operator); their tokens and the saga id.
    Made in this process (`tests.support.in_process`): the tests that use it are about
    the pages, and `pressroom users` and `submit` have tests of their own."""
    from tests.support import in_process  # the app's modules: only the tests that make people

    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
        PRESSROOM_BROKER_URL="inline://",
        **settings,
    )
    cli = Cli(env, tmp_path)
    tokens = in_process.add_people(
        env, tmp_path, {"rita": ["reviewer"], "sam": ["author", "reviewer"], "otto": ["operator"]}
    )
    saga_id = in_process.submit(
        env,
        tmp_path,
        brief=BRIEF,
        corpus=SAMPLE_CORPUS,
        destinations=[f"site:{tmp_path / 'site'}"],
        token=tokens["sam"],
    )
    return env, cli, tokens, saga_id

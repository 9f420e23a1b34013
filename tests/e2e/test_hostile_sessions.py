# ruff: noqa: F811  (pytest fixtures imported from other test modules are parameters here)
"""Live sessions against a revoke or a new token, tried as an attacker would.

A `pressroom mcp` over stdio started before `users revoke` (or before `users
token`) must stop acting for that user at its next call; a web session
signed in with a token must end once `users token NAME` replaces that token.
Every step is a real process: the MCP server and `serve` are subprocesses, the
revoke and the new token come from the `pressroom users` console script.
"""

from __future__ import annotations

import anyio
import pytest

from tests.e2e.test_mcp import (  # noqa: F401  (fixtures)
    BRIEF,
    CORPUS,
    World,
    status_of,
    stdio_session,
    text_of,
    world,
)
from tests.e2e.test_web_sign_in import Site, sign_in, site  # noqa: F401  (fixture)
from tests.support.web import form_token

pytestmark = pytest.mark.e2e


def closed_world(world: World) -> None:
    world.token = world.add_user("admin", "admin", "author", "reviewer", "operator")
    world.add_user("dana", "author")


@pytest.mark.parametrize("how", ["revoke", "new token"])
def test_a_running_stdio_session_stops_at_its_next_call(world: World, how: str) -> None:
    closed_world(world)
    admin = world.token
    submit = {"brief": BRIEF, "corpus": str(CORPUS), "destinations": [world.dest]}

    async def scenario() -> None:
        world.token = world.tokens["dana"]  # the MCP process runs as dana
        async with stdio_session(world) as dana:
            before = await dana.call_tool("saga.submit", submit)
            assert status_of(before) == "ok"
            world.token = admin
            if how == "revoke":
                world.cli("users", "revoke", "dana")
            else:
                world.cli("users", "token", "dana")
            for _ in range(2):  # that call and every later one
                after = await dana.call_tool("saga.submit", submit)
                assert after.is_error and "not authenticated" in text_of(after), after
            listed = await dana.list_tools()  # the process is still up, and answers
            assert listed.tools

    anyio.run(scenario)
    # one submit went through, before the revoke; none after, not even as a refused call
    assert world.rows("SELECT count(*) FROM sagas") == [(1,)]
    rows = world.rows("SELECT status FROM events WHERE tool = 'saga.submit'")
    assert sorted(rows) == [("ok",), ("pending",)], rows


def test_open_mode_stdio_session_stops_once_the_first_user_is_added(world: World) -> None:
    submit = {"brief": BRIEF, "corpus": str(CORPUS), "destinations": [world.dest]}

    async def scenario() -> None:
        async with stdio_session(world, "--as", "mallory") as mallory:
            assert status_of(await mallory.call_tool("saga.submit", submit)) == "ok"
            world.add_user("admin", "admin")  # closed mode from now on
            refused = await mallory.call_tool("saga.submit", submit)
            assert refused.is_error and "not authenticated" in text_of(refused), refused

    anyio.run(scenario)


def test_a_new_token_ends_the_web_session_made_with_the_old(site: Site) -> None:
    with site.client() as rita:
        sign_in(site, rita, "rita")
        page = rita.get(f"/sagas/{site.saga_id}")
        assert page.status_code == 200
        issued = site.as_user("admin").json("users", "token", "rita")
        assert rita.get("/").status_code == 303  # sent to sign in again
        late = rita.post(
            f"/sagas/{site.saga_id}/approve",
            data={"form_token": form_token(page.text), "version": "1"},
            headers={"origin": site.url},
        )
        assert late.status_code == 401, late.text[:300]
    assert site.state() == "ready-for-review"  # nothing approved, nothing published
    # the new token signs in as before
    site.tokens["rita"] = issued["token"]
    with site.client() as again:
        sign_in(site, again, "rita")
        assert again.get(f"/sagas/{site.saga_id}").status_code == 200


def test_rotating_ones_own_token_ends_ones_own_sessions(site: Site) -> None:
    with site.client() as rita:
        sign_in(site, rita, "rita")
        assert rita.get("/").status_code == 200
        site.as_user("rita").json("users", "token", "rita")
        assert rita.get("/").status_code == 303

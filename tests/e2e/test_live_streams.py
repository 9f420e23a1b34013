"""Live-update streams against a real `pressroom serve` process: one user past the
per-user bound gets HTTP 429 with a JSON error, slots come back when streams close,
and with many streams open a normal API call still answers (a generous bound, not a
tight timing: the streams wait on the server's event loop and share one poller)."""

from __future__ import annotations

import asyncio
import statistics
import time
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest

from tests.conftest import Cli
from tests.support.web import served

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
STREAMS = 120


def api_times(url: str, path: str, n: int) -> list[float]:
    out = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(n):
            started = time.perf_counter()
            assert client.get(path).status_code == 200
            out.append(time.perf_counter() - started)
    return out


async def open_streams(
    url: str, path: str, n: int, stack: AsyncExitStack, readers: list[object]
) -> list[int]:
    """Open `n` streams, each kept open by `stack`, their line iterators kept in `readers`
    (an iterator the client drops closes its stream)."""
    client = await stack.enter_async_context(
        httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=n + 10))
    )

    async def one() -> int:
        response = await stack.enter_async_context(client.stream("GET", path))
        if response.status_code == 200:
            lines = response.aiter_lines()
            readers.append(lines)
            assert await anext(lines) == "retry: 2000"
        return response.status_code

    codes = []
    for _ in range(n):  # one at a time, so the server counts them in order
        codes.append(await one())
    return codes


def test_live_streams_are_bounded_per_user_and_leave_the_api_answering(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    submitted = cli.json(
        "submit",
        "--brief",
        "history of the library network",
        "--corpus",
        str(corpus),
        "--dest",
        f"site:{tmp_path / 'site'}",
        "--as",
        "dana",
    )
    sid = submitted["saga_id"]
    env = {**cli.env, "PRESSROOM_LIVE_STREAMS_PER_USER": str(STREAMS), "PRESSROOM_LIVE_STREAMS_TOTAL": "1000"}
    with served(env, tmp_path) as url:
        api = f"/api/sagas/{sid}"
        live = f"/sagas/{sid}/live?since=x"
        quiet = statistics.median(api_times(url, api, 7))

        async def scenario() -> tuple[list[int], int, dict[str, str], list[float], int]:
            async with AsyncExitStack() as stack:
                readers: list[object] = []
                codes = await open_streams(url, live, STREAMS, stack, readers)
                async with httpx.AsyncClient(base_url=url, timeout=30) as extra:
                    over = await extra.get(live)
                    body = over.json()
                await asyncio.sleep(2.5)  # a few polls with every stream open
                busy = await asyncio.to_thread(api_times, url, api, 7)
            await asyncio.sleep(0.5)  # the streams closed: their slots are free again
            async with httpx.AsyncClient(base_url=url, timeout=30) as again, again.stream("GET", live) as r:
                reopened = r.status_code
            return codes, over.status_code, body, busy, reopened

        codes, over, body, busy, reopened = asyncio.run(scenario())
    assert codes == [200] * STREAMS
    assert over == 429 and body["kind"] == "TooManyStreams"
    assert body["error"] == f"at most {STREAMS} live streams per user are open at once"
    assert reopened == 200
    # Generous: the machine is shared. Without the shared poller each stream took a worker
    # thread a second and other answers queued behind them.
    print(
        f"api median {quiet * 1000:.1f} ms quiet, {statistics.median(busy) * 1000:.1f} ms with {STREAMS} streams"
    )
    assert statistics.median(busy) < max(1.0, 20 * quiet), (quiet, busy)

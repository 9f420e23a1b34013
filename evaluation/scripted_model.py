"""A scripted OpenAI-compatible chat-completions server, for tests, `pressroom eval` and
benchmarks (support code, not product).

`POST /v1/chat/completions` answers as the behaviour named by `script` decides
(`evaluation.model_scripts.SCRIPTS`), after sleeping `latency` seconds; `GET
/v1/models` lists the one model; `GET /stats` gives the counters as JSON (with
`?bodies=1`, the request bodies too; requests are counted by role and by their
`Idempotency-Key` header) and `POST /stats/reset` clears them.
Starlette on uvicorn: a waiting request is an asyncio sleep, not a thread, so
hundreds can be in flight at once.

Two ways to run it::

    with ScriptedModel(script="faithful", latency=0.0) as model:   # a background thread
        OpenAI(base_url=model.url, ...)                             # model.url ends in /v1
        model.stats().requests

    python -m evaluation.scripted_model --script NAME --port 0 --latency 1.0
    # prints its URL as the first line of stdout, serves until killed

Answers have the API's shape (`evaluation.model_scripts.completion`: `chat.completion`,
`choices[0].message` with `content` or `tool_calls`, `finish_reason`, `usage`
counted as characters / 4). Errors carry an OpenAI-style `{"error": {...}}` body. A
`drop` closes the connection without a byte of answer: the transport of each
connection is kept (by a uvicorn protocol that records it) under the client
address the request's scope names.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from evaluation.model_conversation import read_conversation
from evaluation.model_scripts import (
    DEFAULT_LATENCY,
    MODEL_NAME,
    SCRIPTS,
    Drop,
    Failure,
    Options,
    completion,
    decide,
)

START_TIMEOUT: Final = 10.0
BACKLOG: Final = 2048

Connections = dict[tuple[str, int], asyncio.Transport]


@dataclass(frozen=True)
class Stats:
    """The counters at one moment. `answered` counts replies computed (a dropped one included)."""

    requests: int = 0
    by_role: dict[str, int] = field(default_factory=dict)
    # Requests by their `Idempotency-Key` header (those sent without one are not counted here).
    by_idempotency_key: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    peak_in_flight: int = 0
    answered: int = 0
    dropped: int = 0
    statuses: dict[str, int] = field(default_factory=dict)  # HTTP status sent -> how many
    tokens_in: int = 0
    tokens_out: int = 0


class Counters:
    """Thread-safe counters: the server's event loop writes them, a test's thread reads them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = Stats()
        self._bodies: list[Any] = []
        self._attempts: Counter[str] = Counter()  # requests seen per conversation key

    def arrive(self, body: Any, role: str, key: str, idempotency_key: str | None = None) -> int:
        """Count a request in; its conversation's request number (0 for the first)."""
        with self._lock:
            s = self._stats
            self._bodies.append(body)
            attempt = self._attempts[key]
            self._attempts[key] += 1
            by_key = dict(s.by_idempotency_key)
            if idempotency_key is not None:
                by_key[idempotency_key] = by_key.get(idempotency_key, 0) + 1
            self._stats = replace(
                s,
                requests=s.requests + 1,
                by_role={**s.by_role, role: s.by_role.get(role, 0) + 1},
                by_idempotency_key=by_key,
                in_flight=s.in_flight + 1,
                peak_in_flight=max(s.peak_in_flight, s.in_flight + 1),
            )
            return attempt

    def leave(self) -> None:
        with self._lock:
            self._stats = replace(self._stats, in_flight=self._stats.in_flight - 1)

    def answer(self, *, status: int | None, tokens_in: int = 0, tokens_out: int = 0) -> bool:
        """Count a request out with its answer: sent with `status`, or computed and dropped
        (`status=None`). Done before the answer leaves, so a client that has it sees it counted."""
        with self._lock:
            s = self._stats
            statuses = dict(s.statuses)
            if status is not None:
                statuses[str(status)] = statuses.get(str(status), 0) + 1
            self._stats = replace(
                s,
                answered=s.answered + (status is None or status == 200),
                dropped=s.dropped + (status is None),
                statuses=statuses,
                in_flight=s.in_flight - 1,
                tokens_in=s.tokens_in + tokens_in,
                tokens_out=s.tokens_out + tokens_out,
            )
            return True

    def snapshot(self) -> Stats:
        with self._lock:
            return self._stats

    def bodies(self) -> list[Any]:
        with self._lock:
            return list(self._bodies)

    def reset(self) -> None:
        """Back to zero, per-conversation counts included; requests still in flight stay counted."""
        with self._lock:
            in_flight = self._stats.in_flight
            self._stats = Stats(in_flight=in_flight, peak_in_flight=in_flight)
            self._bodies.clear()
            self._attempts.clear()


def build_app(
    script: str, *, latency: float, options: Options, counters: Counters, connections: Connections
) -> Starlette:
    """The ASGI app of one scripted model (`connections`: open transports by client address)."""

    async def completions(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            failure = Failure(400, "The body is not a JSON object.", "invalid_request_error")
            counters.arrive(body, "unknown", "")
            counters.answer(status=400)
            return JSONResponse(failure.body(), status_code=400)
        conv = read_conversation(body)
        attempt = counters.arrive(body, conv.role, conv.key, request.headers.get("idempotency-key"))
        answered = False  # `answer()` counts the request out; otherwise `finally` does
        try:
            if latency > 0:
                await asyncio.sleep(latency)
            outcome = decide(script, replace(conv, attempt=attempt), options)
            if isinstance(outcome, Failure):
                answered = counters.answer(status=outcome.status)
                headers = {"retry-after": outcome.retry_after} if outcome.retry_after is not None else None
                return JSONResponse(outcome.body(), status_code=outcome.status, headers=headers)
            reply = outcome.reply if isinstance(outcome, Drop) else outcome
            answer = completion(body, reply, created=int(time.time()))
            usage = answer["usage"]
            tokens = {"tokens_in": usage["prompt_tokens"], "tokens_out": usage["completion_tokens"]}
            if isinstance(outcome, Drop):
                answered = counters.answer(status=None, **tokens)
                await _close(connections, request.scope.get("client"))
                return Response(status_code=204)  # goes nowhere: the connection is closed
            answered = counters.answer(status=200, **tokens)
            return JSONResponse(answer)
        finally:
            if not answered:  # an error or a cancelled wait
                counters.leave()

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": script}],
            }
        )

    async def stats(request: Request) -> Response:
        data: dict[str, Any] = {"script": script, "latency": latency, **asdict(counters.snapshot())}
        if request.query_params.get("bodies"):
            data["bodies"] = counters.bodies()
        return JSONResponse(data)

    async def reset(request: Request) -> Response:
        counters.reset()
        return JSONResponse(asdict(counters.snapshot()))

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
            Route("/stats/reset", reset, methods=["POST"]),
        ]
    )


async def _close(connections: Connections, client: Any) -> None:
    """Close the connection of `client` with nothing sent, and let uvicorn see it is gone
    (so it sends no 500 of its own for the answer that never started)."""
    if not (isinstance(client, (list, tuple)) and len(client) == 2):
        raise RuntimeError(f"no client address to drop the connection of: {client!r}")
    address = (str(client[0]), int(client[1]))
    transport = connections.get(address)
    if transport is None:
        raise RuntimeError(f"no open connection for client {client!r} to drop")
    transport.close()
    for _ in range(100):
        if address not in connections:
            return
        await asyncio.sleep(0)


def recording_protocol(connections: Connections) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, keeping each open connection's transport by client address."""

    class Recording(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if self.client is not None:
                connections[self.client] = transport

        def connection_lost(self, exc: Exception | None) -> None:
            if self.client is not None:
                connections.pop(self.client, None)
            super().connection_lost(exc)

    return Recording


class ScriptedModel:
    """One scripted model server on 127.0.0.1; see the module docstring."""

    def __init__(
        self,
        script: str = "faithful",
        *,
        latency: float | None = None,
        fail_first: int = 2,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if script not in SCRIPTS:
            raise ValueError(f"unknown script {script!r}: one of {', '.join(SCRIPTS)}")
        self.script = script
        self.latency = DEFAULT_LATENCY.get(script, 0.0) if latency is None else latency
        self.host, self.port = host, port
        self.counters = Counters()
        connections: Connections = {}
        app = build_app(
            script,
            latency=self.latency,
            options=Options(fail_first=fail_first),
            counters=self.counters,
            connections=connections,
        )
        config = uvicorn.Config(
            app,
            http=recording_protocol(connections),
            loop="asyncio",
            ws="none",
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=30,
            backlog=BACKLOG,
        )
        self._server = uvicorn.Server(config)
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL an OpenAI client takes (ends in `/v1`); known once bound."""
        if self._socket is None:
            raise RuntimeError("the scripted model is not bound yet")
        return f"http://{self.host}:{self.port}/v1"

    def bind(self) -> str:
        """Take the port (a free one for port 0) and return the URL; nothing is served yet."""
        if self._socket is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(BACKLOG)  # a client may connect as soon as it has the URL; it waits in line
            self._socket = sock
            self.port = sock.getsockname()[1]
        return self.url

    def serve(self) -> None:
        """Serve in this thread until stopped (in the main thread: until SIGINT or SIGTERM)."""
        self.bind()
        assert self._socket is not None
        self._server.run(sockets=[self._socket])

    def start(self) -> ScriptedModel:
        """Serve in a background thread; returns once the server accepts connections."""
        self.bind()
        self._thread = threading.Thread(target=self.serve, name=f"scripted-model-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the scripted model on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def stop(self, *, wait: bool = True) -> None:
        """Ask the server to finish; with `wait`, until its thread has (stop several servers
        at once by asking each without waiting, then stopping each)."""
        self._server.should_exit = True
        if wait and self._thread is not None:
            self._thread.join(timeout=START_TIMEOUT)
            self._thread = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> Stats:
        return self.counters.snapshot()

    @property
    def requests(self) -> list[Any]:
        """The bodies received so far, in arrival order."""
        return self.counters.bodies()

    def reset(self) -> None:
        self.counters.reset()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.scripted_model", description="Serve a scripted chat-completions model."
    )
    parser.add_argument("--script", default="faithful", choices=sorted(SCRIPTS))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 takes a free port")
    parser.add_argument("--latency", type=float, default=None, help="seconds before each answer")
    parser.add_argument("--fail-first", type=int, default=2, help="429s per conversation (429-then-ok)")
    args = parser.parse_args(argv)
    model = ScriptedModel(
        args.script, latency=args.latency, fail_first=args.fail_first, host=args.host, port=args.port
    )
    print(model.bind(), flush=True)
    model.serve()
    return 0


__all__ = [
    "Counters",
    "ScriptedModel",
    "Stats",
    "build_app",
    "main",
]


if __name__ == "__main__":
    sys.exit(main())

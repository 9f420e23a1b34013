"""A real webhook receiver on 127.0.0.1 for tests, speaking the Pressroom protocol.

Usage::

    with WebhookServer() as hook:                 # random free port, own thread
        dest = open_destination(f"webhook:{hook.url}", timeout=0.5)
        ...
        hook.set_mode("stall")                    # switch behaviour at any time
        assert hook.posts == 1 and "k1" in hook.applied

Modes (what a POST does; GET and DELETE behave normally unless noted):

- `normal`: apply once per `Idempotency-Key`, answer 200 with a JSON
  receipt; the same key again answers the same receipt without applying;
  the same key with a different body answers 422.
- `reject`: answer 422, apply nothing.
- `error`: answer 500, apply nothing.
- `stall`: apply, then hold the answer for `stall_seconds` (released early
  by `release()` or `stop()`), so a client with a shorter timeout gives up
  after sending.
- `drop`: apply, then close the connection without answering.
- `no_status`: POST and DELETE as normal, GET answers 501 (so does any
  mode when the server is built with `status=False`).

GET with the header: 200 and the receipt, or 404. DELETE with the header:
200 and forget the key (a later POST applies again), or 404. `delete_mode`
breaks the undo on its own: `refuse` answers 409 (a definite "not done") and
deletes nothing; `stall` deletes, then holds the answer like a stalled POST.

`WebhookServer` stores a document before it holds the answer, so its status
is truthful at every moment and it never burns a key (tests of recovery by
status rely on that). `ReferenceReceiver` runs the project's reference
receiver (`examples/webhook_receiver.py`) as a process: a POST is processed
for `delay` seconds before anything is stored, a status asked meanwhile
answers 409, and a key answered 404 is burned. Its journal says what it
applied and undid.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

RECEIVER = Path(__file__).resolve().parents[2] / "examples" / "webhook_receiver.py"

Mode = Literal["normal", "reject", "error", "stall", "drop", "no_status"]
MODES: tuple[Mode, ...] = ("normal", "reject", "error", "stall", "drop", "no_status")


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    key: str | None
    body: Any
    host: str | None = None  # the Host header
    at: float = field(default_factory=time.monotonic)  # when the server read it


class WebhookServer:
    """A threaded HTTP server implementing the webhook protocol, with fault modes."""

    def __init__(self, mode: Mode = "normal", *, stall_seconds: float = 5.0, status: bool = True) -> None:
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._mode: Mode = "normal"
        self.set_mode(mode)
        self.stall_seconds = stall_seconds
        self.delete_mode: Literal["normal", "refuse", "stall"] = "normal"
        self.requests: Counter[str] = Counter()
        self.received: list[Received] = []
        self.status_supported = status  # False: GET answers 501 whatever the mode
        self.applied: dict[str, Any] = {}  # key -> body applied under it
        self.receipts: dict[str, dict[str, Any]] = {}
        self.apply_count = 0
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------

    def start(self) -> WebhookServer:
        self._released.clear()
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.hook = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="webhook-server", daemon=True
        )
        self._thread.start()
        return self

    def release(self) -> None:
        """Answer the stalled POSTs now; later ones in `stall` mode answer at once."""
        self._released.set()

    def stop(self) -> None:
        """Release stalled answers, stop serving and wait for every handler thread."""
        self._released.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()  # joins handler threads (block_on_close)
            self._httpd = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observation and control -------------------------------------------

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    @property
    def posts(self) -> int:
        return self.requests["POST"]

    @property
    def mode(self) -> Mode:
        return self._mode

    def set_mode(self, mode: Mode) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
        self._mode = mode

    # -- protocol (called by the handler) ------------------------------------

    def _record(self, request: Received) -> None:
        with self._lock:
            self.requests[request.method] += 1
            self.received.append(request)

    def _post(self, key: str, body: Any) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if key in self.applied:
                if self.applied[key] != body:
                    return 422, {"error": "idempotency key reused with a different body"}
                return 200, self.receipts[key]
            self.apply_count += 1
            receipt = {
                "id": f"wh-{self.apply_count}",
                "idempotency_key": key,
                "version_digest": body.get("version_digest") if isinstance(body, dict) else None,
            }
            self.applied[key] = body
            self.receipts[key] = receipt
            return 200, receipt

    def _get(self, key: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if key in self.receipts:
                return 200, self.receipts[key]
            return 404, {"error": "unknown key"}

    def _delete(self, key: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.delete_mode == "refuse":
                return 409, {"error": "the undo is refused here"}
            if key not in self.applied:
                return 404, {"error": "unknown key"}
            del self.applied[key]
            del self.receipts[key]
            return 200, {"deleted": key}


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() waits for handlers
    block_on_close = True
    hook: WebhookServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 5  # a silent client cannot hold a handler thread for ever

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        hook = self.server.hook
        key, body = self._read("POST")
        if key is None:
            return
        mode = hook.mode
        if mode == "reject":
            self._answer(422, {"error": "rejected by test server"})
            return
        if mode == "error":
            self._answer(500, {"error": "test server failure"})
            return
        if body is None:
            self._answer(400, {"error": "body is not JSON"})
            return
        code, payload = hook._post(key, body)
        if mode == "stall":
            hook._released.wait(hook.stall_seconds)
        if mode == "drop":
            self.close_connection = True
            return
        self._answer(code, payload)

    def do_GET(self) -> None:
        key, _ = self._read("GET")
        if key is None:
            return
        if self.server.hook.mode == "no_status" or not self.server.hook.status_supported:
            self._answer(501, {"error": "status not supported"})
            return
        self._answer(*self.server.hook._get(key))

    def do_DELETE(self) -> None:
        key, _ = self._read("DELETE")
        if key is not None:
            answer = self.server.hook._delete(key)
            hook = self.server.hook
            if hook.delete_mode == "stall":
                hook._released.wait(hook.stall_seconds)
            self._answer(*answer)

    def _read(self, method: str) -> tuple[str | None, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        key = self.headers.get("Idempotency-Key")
        self.server.hook._record(Received(method, self.path, key, body, self.headers.get("Host")))
        if not key:
            self._answer(400, {"error": "missing Idempotency-Key"})
            return None, None
        return key, body

    def _answer(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a stall test); nothing to tell it


class ReferenceReceiver:
    """`python examples/webhook_receiver.py` on a free 127.0.0.1 port, with a journal."""

    def __init__(self, folder: Path, *, delay: float = 0.0) -> None:
        self.journal_path = folder / f"receiver-{time.monotonic_ns()}.jsonl"
        self.delay = delay
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> ReferenceReceiver:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        args = [sys.executable, str(RECEIVER), "--port", str(self.port), "--delay", str(self.delay)]
        args += ["--journal", str(self.journal_path)]
        self._proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()  # printed once the socket listens
        if not line.startswith("listening on"):
            self.stop()
            raise RuntimeError(f"the reference receiver did not start: {line!r}")
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None

    def __enter__(self) -> ReferenceReceiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def journal(self) -> list[dict[str, Any]]:
        """Every change the receiver made, in order."""
        if not self.journal_path.exists():
            return []
        lines = self.journal_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def keys(self, event: str) -> list[str]:
        """The keys of every journal entry of one kind (`applied`, `undone`, `absent`, ...)."""
        return [e["key"] for e in self.journal() if e["event"] == event]

    def stored(self) -> set[str]:
        """The keys whose document the receiver holds now: applied and not undone since."""
        held: set[str] = set()
        for entry in self.journal():
            if entry["event"] == "applied":
                held.add(entry["key"])
            elif entry["event"] == "undone":
                held.discard(entry["key"])
        return held

    def most_in_flight(self) -> int:
        """The most POSTs the receiver was processing at one moment."""
        now = most = 0
        for entry in self.journal():
            if entry["event"] == "received":
                now += 1
            elif entry["event"] in ("applied", "refused", "replayed"):
                now -= 1
            most = max(most, now)
        return most


__all__ = ["MODES", "RECEIVER", "Mode", "Received", "ReferenceReceiver", "WebhookServer"]

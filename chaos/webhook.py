"""The suite's own webhook destination: the Pressroom webhook protocol on a fixed
port, a journal of every effect, and the faults the nemesis asks for.

Modes (what a POST does):

- `normal`: apply once per `Idempotency-Key` and answer 200 with a receipt; a key
  already applied answers the same receipt and applies nothing (a replay).
A fault may be armed for the next n POSTs (`arm`), so it meets real publishes.

- `error`: answer 503 and apply nothing (the caller cannot know that: 5xx is
  "maybe applied" to Pressroom).
- `stall`: apply, then hold the answer for `stall_seconds` (longer than the
  destination timeout), so the caller gives up after the effect happened.
- `reject`: answer 409 and apply nothing (a definite failure: 4xx is "not
  applied" to Pressroom, whatever the status query says).
- `refuse`: the listening socket is closed; connections are refused.

GET answers 200 and the receipt, or 404 (or 503 while `status_down_until`
has not passed: a fault may take the status query down with it, so the
caller cannot find out and the step stays uncertain). DELETE forgets the key
(200), or 404; while `delete_down_until` has not passed it does nothing and
answers as `delete_mode` says: `error` 503 (maybe deleted, to the caller),
`refuse` 409 (a definite refusal, which the caller may try again).

The journal (`events`, also appended to a JSON-lines file) holds one entry per
apply, replay and undo, with the key, saga id and version digest of the body:
the checker counts applies per key from it. `applied_now` is the server's view
of what is live, which the reconciler asks as "the destination".
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODES = ("normal", "error", "stall", "reject", "refuse")
ARMED = ("error", "stall", "reject")  # modes that count down the POSTs they meet
DELETE_MODES = {"error": 503, "refuse": 409}


class ChaosWebhook:
    def __init__(self, port: int, journal: Path, *, stall_seconds: float, name: str = "hook") -> None:
        self.name = name
        self.port = port
        self.stall_seconds = stall_seconds
        self.journal = journal
        self._lock = threading.Lock()
        self._release = threading.Event()
        self.mode = "normal"
        self.events: list[dict[str, Any]] = []
        self.applied_now: dict[str, dict[str, Any]] = {}  # key -> body
        self._receipts: dict[str, dict[str, Any]] = {}
        self._seq = 0
        self._armed: int | None = None
        self.status_down_until = 0.0  # time.monotonic() deadline: GET answers 503 until then
        self.delete_mode = "error"
        self.delete_down_until = 0.0  # time.monotonic() deadline: DELETE fails until then
        self.requests: dict[str, int] = {}
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        if self._httpd is not None:
            return
        httpd = _Server(("127.0.0.1", self.port), _Handler)
        httpd.hook = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def _close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def stop(self) -> None:
        self._release.set()
        self._close()

    def fail_deletes(self, mode: str, seconds: float) -> None:
        """Every DELETE for the next `seconds` fails as `mode` says (`DELETE_MODES`)."""
        if mode not in DELETE_MODES:
            raise ValueError(f"unknown DELETE mode {mode!r}")
        self.delete_mode = mode
        self.delete_down_until = max(self.delete_down_until, time.monotonic() + seconds)

    def arm(self, mode: str, posts: int) -> None:
        """`mode` for the next `posts` POST requests, then `normal` again."""
        with self._lock:
            self._armed = posts
        self.set_mode(mode)

    def take_mode(self) -> str:
        """The mode this POST meets; an armed fault counts it down."""
        with self._lock:
            mode = self.mode
            if self._armed is not None and mode in ARMED:
                self._armed -= 1
                if self._armed <= 0:
                    self._armed = None
                    self.mode = "normal"
            return mode

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        if mode == "refuse":
            self.mode = mode
            self._release.set()
            self._close()
            return
        if mode == "normal":
            self._armed = None
        else:
            self._release.clear()
        self.mode = mode
        self.start()

    # -- journal -----------------------------------------------------------
    def _note(self, kind: str, key: str, body: Any) -> None:
        entry = {
            "kind": kind,
            "key": key,
            "saga_id": body.get("saga_id") if isinstance(body, dict) else None,
            "version_digest": body.get("version_digest") if isinstance(body, dict) else None,
            "at": time.time(),
            "mode": self.mode,
        }
        self.events.append(entry)
        with self.journal.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def _count(self, method: str) -> None:
        with self._lock:
            self.requests[method] = self.requests.get(method, 0) + 1

    def post(self, key: str, body: Any) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if key in self._receipts:
                if self.applied_now.get(key) != body:
                    return 422, {"error": "idempotency key reused with a different body"}
                self._note("replay", key, body)
                return 200, self._receipts[key]
            self._seq += 1
            receipt = {
                "id": f"chaos-{self._seq}",
                "idempotency_key": key,
                "version_digest": body.get("version_digest"),
            }
            self.applied_now[key] = body
            self._receipts[key] = receipt
            self._note("apply", key, body)
            return 200, receipt

    def get(self, key: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if key in self._receipts:
                return 200, self._receipts[key]
            return 404, {"error": "unknown key"}

    def delete(self, key: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if key not in self._receipts:
                return 404, {"error": "unknown key"}
            body = self.applied_now.pop(key)
            del self._receipts[key]
            self._note("undo", key, body)
            return 200, {"deleted": key}

    def is_applied(self, key: str) -> bool:
        with self._lock:
            return key in self._receipts


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    hook: ChaosWebhook


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        hook = self.server.hook
        key, body = self._read("POST")
        if key is None:
            return
        mode = hook.take_mode()
        if mode == "error":
            hook._count("POST answered 503")
            self._answer(503, {"error": "chaos: destination failing"})
            return
        if mode == "reject":
            hook._count("POST answered 409")
            self._answer(409, {"error": "chaos: destination rejects this publish"})
            return
        if not isinstance(body, dict):
            self._answer(400, {"error": "body is not a JSON object"})
            return
        code, payload = hook.post(key, body)
        if mode == "stall":
            hook._count("POST held past the timeout")
            hook._release.wait(hook.stall_seconds)
        self._answer(code, payload)

    def do_GET(self) -> None:
        hook = self.server.hook
        key, _ = self._read("GET")
        if key is None:
            return
        if time.monotonic() < hook.status_down_until:
            hook._count("GET answered 503")
            self._answer(503, {"error": "chaos: status unavailable"})
            return
        self._answer(*hook.get(key))

    def do_DELETE(self) -> None:
        hook = self.server.hook
        key, _ = self._read("DELETE")
        if key is None:
            return
        if time.monotonic() < hook.delete_down_until:
            code = DELETE_MODES[hook.delete_mode]
            hook._count(f"DELETE answered {code}")
            self._answer(code, {"error": "chaos: not deleting now"})
            return
        self._answer(*hook.delete(key))

    def _read(self, method: str) -> tuple[str | None, Any]:
        self.server.hook._count(method)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        key = self.headers.get("Idempotency-Key")
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
            pass  # the caller gave up (stall)

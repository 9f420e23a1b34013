"""A reference receiver for Pressroom's `webhook:` destination (standard library only).

    python examples/webhook_receiver.py --port 8099 [--host 127.0.0.1] [--delay SECONDS]
                                        [--journal PATH]

It keeps the protocol's promises to Pressroom, including the two that make an
unknown outcome safe to resolve by asking:

- `POST` (header `Idempotency-Key`, JSON body `saga_id`, `version`,
  `version_digest`, `title`, `markdown`): the document is processed for
  `--delay` seconds, then stored; 200 with the receipt. The same key again
  answers the same receipt without storing twice; with a different body, 422.
  While a POST with the key is still being processed, another one answers 409.
  A key whose status was answered 404 is *burned*: a POST with it answers 410
  and stores nothing.
- `GET` with the header: 200 and the receipt when stored; 409 while a POST
  with the key is still being processed (Pressroom reads this as unknown);
  otherwise 404, and from then on the key is burned.
- `DELETE` with the header: removes the document, 200; 409 while a POST with
  the key is being processed; 404 when nothing is stored under it. A removed
  key is not burned: Pressroom may publish it again under the same key.

Every change is appended to the journal (JSON lines: `event`, `key`, `at`),
so what the receiver applied and undid can be read back:
`received`, `applied`, `replayed`, `refused` (with `status`), `absent`,
`in-flight`, `undone`. Keys are one space for every path; state is in memory.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MAX_BODY = 5 * 1024 * 1024
KEY_HEADER = "Idempotency-Key"


class Receiver:
    """The receiver's state and rules; the HTTP handler only translates."""

    def __init__(self, *, delay: float = 0.0, journal: Path | None = None) -> None:
        self.delay = delay
        self.journal = journal
        self._lock = threading.Lock()
        self.applied: dict[str, dict[str, Any]] = {}  # key -> body
        self.receipts: dict[str, dict[str, Any]] = {}
        self.in_flight: set[str] = set()
        self.burned: set[str] = set()
        self.undone: list[str] = []
        self._count = 0

    def _note(self, event: str, key: str, **more: Any) -> None:
        """Append one journal line (called with the lock held: lines keep the order of events)."""
        if self.journal is not None:
            line = json.dumps({"event": event, "key": key, "at": time.time(), **more})
            with self.journal.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    def post(self, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self._note("received", key)
            if key in self.burned:
                self._note("refused", key, status=410)
                return 410, {"error": "key burned: its status was answered 404; publish under a new key"}
            if key in self.in_flight:
                self._note("refused", key, status=409)
                return 409, {"error": "a POST with this key is still being processed"}
            if key in self.applied:
                if self.applied[key] != body:
                    self._note("refused", key, status=422)
                    return 422, {"error": "idempotency key reused with a different body"}
                self._note("replayed", key)
                return 200, self.receipts[key]
            self.in_flight.add(key)
        try:
            time.sleep(self.delay)  # the processing a slow receiver does before the document is stored
        finally:
            with self._lock:
                self.in_flight.discard(key)
                self._count += 1
                receipt = {
                    "id": f"doc-{self._count}",
                    "idempotency_key": key,
                    "version_digest": body.get("version_digest"),
                }
                self.applied[key] = body
                self.receipts[key] = receipt
                self._note("applied", key, version_digest=body.get("version_digest"))
        return 200, receipt

    def status(self, key: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if key in self.in_flight:
                self._note("in-flight", key)
                return 409, {"error": "a POST with this key is still being processed"}
            if key in self.receipts:
                return 200, self.receipts[key]
            if key not in self.burned:
                self.burned.add(key)
                self._note("absent", key)
            return 404, {"error": "unknown key; it is burned now"}

    def delete(self, key: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if key in self.in_flight:
                return 409, {"error": "a POST with this key is still being processed"}
            if key not in self.applied:
                return 404, {"error": "unknown key"}
            del self.applied[key]
            del self.receipts[key]
            self.undone.append(key)
            self._note("undone", key)
            return 200, {"deleted": key}


class ReceiverServer(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


class Handler(BaseHTTPRequestHandler):
    server: ReceiverServer
    timeout = 30  # a silent client cannot hold a handler thread for ever

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        key = self._key()
        if key is None:
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._answer(413, {"error": f"body over {MAX_BODY} bytes"})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._answer(400, {"error": "the body must be a JSON object"})
            return
        self._answer(*self.server.receiver.post(key, body))

    def do_GET(self) -> None:
        key = self._key()
        if key is not None:
            self._answer(*self.server.receiver.status(key))

    def do_DELETE(self) -> None:
        key = self._key()
        if key is not None:
            self._answer(*self.server.receiver.delete(key))

    def _key(self) -> str | None:
        key = (self.headers.get(KEY_HEADER) or "").strip()
        if not key or len(key) > 512:
            self._answer(400, {"error": f"a {KEY_HEADER} header (1 to 512 characters) is needed"})
            return None
        return key

    def _answer(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the caller gave up waiting; what was stored stays stored


def serve(host: str, port: int, receiver: Receiver) -> ReceiverServer:
    server = ReceiverServer((host, port), Handler)
    server.receiver = receiver
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A reference receiver for Pressroom's webhook protocol.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each new POST is processed")
    parser.add_argument("--journal", type=Path, default=None, help="append every change here (JSON lines)")
    args = parser.parse_args(argv)
    server = serve(args.host, args.port, Receiver(delay=args.delay, journal=args.journal))
    print(f"listening on http://{args.host}:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

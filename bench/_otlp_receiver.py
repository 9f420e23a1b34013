"""A tiny OTLP/HTTP trace receiver for bench/tracing_overhead.py (not a bench; started by it).

    python bench/_otlp_receiver.py

Listens on 127.0.0.1 (a free port, printed as the first line of stdout),
answers `POST /v1/traces` with 200 and an empty protobuf body, and keeps the
request bodies it got. `GET /stats` answers JSON: requests, bytes, and spans
(counted by decoding the bodies only when asked, so decoding never competes
with the export). Runs in its own process, like a real collector, so its
work does not share the bench process's interpreter lock.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_bodies: list[bytes] = []
_lock = threading.Lock()


def _spans() -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    count = 0
    with _lock:
        bodies = list(_bodies)
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                count += len(scope.spans)
    return count


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path != "/v1/traces":
            self._answer(404, b"", "text/plain")
            return
        with _lock:
            _bodies.append(body)
        self._answer(200, b"", "application/x-protobuf")

    def do_GET(self) -> None:
        if self.path != "/stats":
            self._answer(404, b"", "text/plain")
            return
        with _lock:
            requests, size = len(_bodies), sum(len(b) for b in _bodies)
        data = json.dumps({"requests": requests, "bytes": size, "spans": _spans()}).encode()
        self._answer(200, data, "application/json")

    def _answer(self, code: int, data: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()

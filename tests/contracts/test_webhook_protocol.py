"""The webhook protocol's edges, against real HTTP servers on 127.0.0.1.

- Pressroom reads a status answer other than 200 and 404 as unknown.
- The reference receiver (`examples/webhook_receiver.py`, run as a process)
  answers 409 while a POST is processed and burns a key it answered 404.
- The adapter calls only a host whose every address is public or allowed, and
  connects to the address it checked.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from orchestrator.core.errors import MaybeApplied, NotApplied
from sagas.destinations.base import PublishedVersion
from sagas.destinations.registry import open_destination
from sagas.destinations.webhook import WebhookDestination
from sagas.destinations.webhook_urls import IPAddress, WebhookAllow
from tests.support.webhook_server import ReferenceReceiver, WebhookServer

LOOPBACK = WebhookAllow.parse("127.0.0.1")


def version() -> PublishedVersion:
    markdown = "# Branches\n\nThe bookmobile runs on Tuesdays.\n"
    return PublishedVersion(
        saga_id="saga-1",
        version=1,
        version_digest=hashlib.sha256(markdown.encode()).hexdigest(),
        title="Branches",
        slug="",
        markdown=markdown,
    )


# -- any status answer but 200 and 404 is unknown ----------------------------------


class _Fixed(BaseHTTPRequestHandler):
    answer: bytes = b""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.wfile.write(self.server.answer)  # type: ignore[attr-defined]
        self.close_connection = True


@pytest.fixture
def fixed_answer() -> Iterator[tuple[str, ThreadingHTTPServer]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", server
    finally:
        server.shutdown()
        server.server_close()


def raw(code: int, reason: str, extra: str = "") -> bytes:
    body = b'{"error": "not now"}'
    head = f"HTTP/1.1 {code} {reason}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


@pytest.mark.parametrize(
    "answer",
    [
        raw(409, "Conflict"),
        raw(500, "Internal Server Error"),
        raw(302, "Found", "Location: http://127.0.0.1:1/elsewhere\r\n"),
        raw(204, "No Content"),
        raw(410, "Gone"),
        raw(201, "Created"),
        b"\x00\x01 this is not HTTP at all\r\n\r\n",
        b"",
    ],
    ids=["409", "500", "302", "204", "410", "201", "garbage", "silence"],
)
def test_any_status_answer_but_200_or_404_is_unknown(
    fixed_answer: tuple[str, ThreadingHTTPServer], answer: bytes
) -> None:
    url, server = fixed_answer
    server.answer = answer  # type: ignore[attr-defined]
    dest = open_destination(f"webhook:{url}", timeout=2.0, webhook_allow=LOOPBACK)
    assert dest.status("k1").kind == "unknown"


@pytest.mark.parametrize(("answer", "kind"), [(raw(404, "Not Found"), "absent"), (raw(200, "OK"), "applied")])
def test_200_is_applied_and_404_absent(
    fixed_answer: tuple[str, ThreadingHTTPServer], answer: bytes, kind: str
) -> None:
    url, server = fixed_answer
    server.answer = answer  # type: ignore[attr-defined]
    assert open_destination(f"webhook:{url}", timeout=2.0, webhook_allow=LOOPBACK).status("k1").kind == kind


# -- the reference receiver ----------------------------------------------------------


def test_the_reference_receiver_answers_409_while_a_post_is_processed(tmp_path: Path) -> None:
    with ReferenceReceiver(tmp_path, delay=1.5) as hook:
        dest = open_destination(f"webhook:{hook.url()}", timeout=0.3, webhook_allow=LOOPBACK)
        with pytest.raises(MaybeApplied):
            dest.publish("k1", version())  # gives up after 0.3 s; the receiver keeps processing
        answer = dest.status("k1")
        assert answer.kind == "unknown" and "409" in answer.detail
        second = httpx.post(hook.url(), json={"x": 1}, headers={"Idempotency-Key": "k1"}, timeout=5)
        assert second.status_code == 409, "a second POST while the first is processed is refused"
        deadline = time.monotonic() + 10
        while "k1" not in hook.stored() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hook.keys("applied") == ["k1"], "the first POST was stored once, after its processing"
        assert dest.status("k1").kind == "applied"


def test_a_key_answered_404_is_burned_and_a_late_post_stores_nothing(tmp_path: Path) -> None:
    with ReferenceReceiver(tmp_path) as hook:
        dest = open_destination(f"webhook:{hook.url()}", timeout=5.0, webhook_allow=LOOPBACK)
        assert dest.status("late").kind == "absent"
        with pytest.raises(NotApplied) as caught:
            dest.publish("late", version())  # arrives after the 404: too late
        assert caught.value.status_code == 410  # type: ignore[attr-defined]
        assert dest.status("late").kind == "absent"
        assert hook.stored() == set() and hook.keys("refused") == ["late"]
        # Another key is untouched, and an undone key may be published again under the same key.
        dest.publish("fresh", version())
        dest.compensate("fresh", {})
        dest.publish("fresh", version())
        assert hook.keys("applied") == ["fresh", "fresh"] and hook.keys("undone") == ["fresh"]


def test_the_reference_receiver_replays_a_key_and_refuses_a_changed_body(tmp_path: Path) -> None:
    with ReferenceReceiver(tmp_path) as hook:
        dest = open_destination(f"webhook:{hook.url()}", timeout=5.0, webhook_allow=LOOPBACK)
        first = dest.publish("k", version())
        assert dest.publish("k", version()) == first
        changed = httpx.post(hook.url(), json={"title": "other"}, headers={"Idempotency-Key": "k"}, timeout=5)
        assert changed.status_code == 422
        assert hook.keys("applied") == ["k"]


# -- hosts: checked at the effect, connected to as checked -------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "127.0.0.1",
        "[::1]",
        "2130706433",
        "0x7f.1",
        "127.1",
        "[::ffff:127.0.0.1]",
        "localhost",
        "169.254.169.254",
    ],
)
def test_a_non_public_host_is_refused_at_the_effect_and_nothing_is_sent(
    webhook_server: WebhookServer, spelling: str
) -> None:
    port = webhook_server.url.split(":")[2].split("/")[0]
    dest = open_destination(f"webhook:http://{spelling}:{port}/hook", timeout=2.0)  # no allow-list
    with pytest.raises(NotApplied, match="nothing was sent") as caught:
        dest.publish("k1", version())
    assert "PRESSROOM_WEBHOOK_ALLOW" in str(caught.value)
    assert dest.status("k1").kind == "unknown"
    with pytest.raises(NotApplied):
        dest.compensate("k1", {})
    assert webhook_server.received == []


def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(
    webhook_server: WebhookServer,
) -> None:
    port = int(webhook_server.url.split(":")[2].split("/")[0])
    asked: list[str] = []

    def resolver(host: str, _port: int) -> list[IPAddress]:
        asked.append(host)
        return [ipaddress_of("127.0.0.1")]

    # `.invalid` never resolves in DNS: the call reaches the server only through the checked address.
    dest = WebhookDestination(f"http://hooks.invalid:{port}/hook", allow=LOOPBACK, resolver=resolver)
    dest.publish("k1", version())
    assert asked == ["hooks.invalid"], "resolved once, by the check"
    [request] = webhook_server.received
    assert request.key == "k1"
    assert request.host == f"hooks.invalid:{port}"


def test_each_call_checks_the_answer_it_gets(webhook_server: WebhookServer) -> None:
    port = int(webhook_server.url.split(":")[2].split("/")[0])
    answers = iter([["127.0.0.1"], ["10.0.0.1"], ["127.0.0.1", "169.254.169.254"]])

    def rebinding(host: str, _port: int) -> list[IPAddress]:
        return [ipaddress_of(a) for a in next(answers)]

    dest = WebhookDestination(f"http://rebind.invalid:{port}/hook", allow=LOOPBACK, resolver=rebinding)
    dest.publish("k1", version())
    with pytest.raises(NotApplied, match="10.0.0.1, private"):
        dest.compensate("k1", {})
    with pytest.raises(NotApplied, match="169.254.169.254, a cloud metadata address"):
        dest.publish("k2", version())
    assert [r.key for r in webhook_server.received] == ["k1"]


def ipaddress_of(text: str) -> IPAddress:
    import ipaddress

    return ipaddress.ip_address(text)


@pytest.fixture
def webhook_server() -> Iterator[WebhookServer]:
    with WebhookServer() as server:
        yield server


# -- TLS: the certificate is checked for the name, though the connection goes to an address --


def _certificates(folder: Path, name: str) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for `name` signed by it: (ca, cert, key) files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(cert.public_bytes(pem))
    key_bytes = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    paths[2].write_bytes(key_bytes)
    return paths


@pytest.mark.parametrize(("certified", "reached"), [("hooks.invalid", True), ("other.invalid", False)])
def test_tls_is_verified_for_the_name_at_the_checked_address(
    tmp_path: Path, certified: str, reached: bool
) -> None:
    import ssl

    ca, cert, key = _certificates(tmp_path, certified)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    with WebhookServer() as server:
        httpd = server._httpd
        assert httpd is not None
        httpd.socket = server_tls.wrap_socket(httpd.socket, server_side=True)
        port = int(server.url.split(":")[2].split("/")[0])
        dest = WebhookDestination(
            f"https://hooks.invalid:{port}/hook",
            allow=LOOPBACK,
            resolver=lambda host, _port: [ipaddress_of("127.0.0.1")],
            tls=ssl.create_default_context(cafile=str(ca)),
        )
        if reached:
            dest.publish("k1", version())
            assert [r.host for r in server.received] == [f"hooks.invalid:{port}"]
        else:
            with pytest.raises(NotApplied, match="never sent"):
                dest.publish("k1", version())
            assert server.received == []

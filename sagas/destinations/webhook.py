"""`webhook:URL`: an HTTP endpoint speaking the Pressroom webhook protocol.

- URI: `webhook:URL`, URL `http://` or `https://` with a host.
- Idempotency: `POST URL` with header `Idempotency-Key: <key>` and the JSON
  body `saga_id`, `version`, `version_digest`, `title`, `markdown`; the
  receiver must apply one key once and answer repeats with the same receipt.
  The receipt is the 2xx response body (a JSON object, else `{"body": text}`)
  plus `status_code`.
- Status: `GET URL` with the same header: 200 `applied` (the body is the
  receipt), 404 `absent`, anything else or no answer `unknown`.
- Compensation: `DELETE URL` with the same header; 2xx or 404 is done.

Outcomes of a call, by what is known about the request::

    never left (refused, DNS, connect timeout)      NotApplied
    answered 4xx                                    NotApplied
    answered 2xx                                    applied
    answered 1xx/3xx/5xx                            MaybeApplied
    sent, then no answer (read timeout, dropped)    MaybeApplied

One HTTP client per call, closed before returning; no retries (a retry is a
decision for the saga, under the same key).
"""

from __future__ import annotations

import functools
import ssl
from typing import Any, ClassVar, NoReturn
from urllib.parse import urlsplit

import httpx

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import PublishedVersion, StatusAnswer
from sagas.destinations.slugs import check_key

IDEMPOTENCY_HEADER = "Idempotency-Key"

# Raised before a single byte of the request reached the server.
_NEVER_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
    httpx.LocalProtocolError,
    httpx.ProxyError,
)


def receipt_of(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:  # not JSON (or not UTF-8): keep the text
        body = None
        receipt: dict[str, Any] = {"body": response.text}
    else:
        receipt = dict(body) if isinstance(body, dict) else {"body": body}
    receipt["status_code"] = response.status_code
    return receipt


class WebhookDestination:
    """A `Destination` over one webhook URL."""

    form: ClassVar[str] = "webhook:URL"

    def __init__(self, url: str, *, uri: str | None = None, timeout: float = 10.0) -> None:
        self.check_target(url)
        self.url = url
        self.uri = uri or f"webhook:{url}"
        self.timeout = timeout

    @classmethod
    def check_target(cls, target: str) -> None:
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(
                f"webhook: needs an http(s) URL with a host, as in webhook:https://host/path; got {target!r}",
                target=target,
            )

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float) -> WebhookDestination:
        return cls(target, uri=uri, timeout=timeout)

    # -- the port -----------------------------------------------------------

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        check_key(key)
        body = {
            "saga_id": version.saga_id,
            "version": version.version,
            "version_digest": version.version_digest,
            "title": version.title,
            "markdown": version.markdown,
        }
        try:
            response = self._request("POST", key, body)
        except httpx.HTTPError as exc:
            self._raise_for_transport("POST", key, exc)
        if response.is_success:
            return receipt_of(response)
        self._raise_for_status("POST", key, response)

    def status(self, key: str) -> StatusAnswer:
        check_key(key)
        try:
            response = self._request("GET", key)
        except httpx.HTTPError as exc:
            return StatusAnswer(kind="unknown", detail=f"GET failed: {type(exc).__name__}: {exc}")
        if response.status_code == 200:
            return StatusAnswer(kind="applied", receipt=receipt_of(response))
        if response.status_code == 404:
            return StatusAnswer(kind="absent")
        return StatusAnswer(kind="unknown", detail=f"GET answered {response.status_code}")

    def compensate(self, key: str, receipt: dict[str, Any]) -> None:
        check_key(key)
        try:
            response = self._request("DELETE", key)
        except httpx.HTTPError as exc:
            self._raise_for_transport("DELETE", key, exc)
        if response.is_success or response.status_code == 404:
            return
        self._raise_for_status("DELETE", key, response)

    # -- HTTP -----------------------------------------------------------------

    def _request(self, method: str, key: str, body: dict[str, Any] | None = None) -> httpx.Response:
        headers = {IDEMPOTENCY_HEADER: key, "Accept": "application/json"}
        # One TLS context per process: building one loads the CA bundle (~25 ms).
        with httpx.Client(timeout=self.timeout, follow_redirects=False, verify=_tls_context()) as client:
            return client.request(method, self.url, headers=headers, json=body)

    def _raise_for_transport(self, method: str, key: str, exc: httpx.HTTPError) -> NoReturn:
        detail = f"{self.uri}: {method} {type(exc).__name__}: {exc}"
        if isinstance(exc, _NEVER_SENT):
            raise NotApplied(f"{detail} (request never sent)", uri=self.uri, key=key) from exc
        raise MaybeApplied(f"{detail} (request may have been received)", uri=self.uri, key=key) from exc

    def _raise_for_status(self, method: str, key: str, response: httpx.Response) -> NoReturn:
        code = response.status_code
        detail = f"{self.uri}: {method} answered {code}: {response.text[:200]}"
        if 400 <= code < 500:
            raise NotApplied(detail, uri=self.uri, key=key, status_code=code)
        raise MaybeApplied(detail, uri=self.uri, key=key, status_code=code)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The default verifying context (system CAs via certifi, as httpx does), built once."""
    return httpx.create_ssl_context()


__all__ = ["IDEMPOTENCY_HEADER", "WebhookDestination", "receipt_of"]

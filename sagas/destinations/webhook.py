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
- Hosts: before each call the host is resolved and every address it resolves
  to must be public or in `PRESSROOM_WEBHOOK_ALLOW` (`webhook_urls.host_refusal`);
  otherwise nothing is sent (`NotApplied`, a definite failure naming the
  reason; a status question answers `unknown`). The connection then goes to
  the address that was checked, with the name in the `Host` header and as
  the TLS server name, so a second DNS answer cannot redirect it. Proxy
  variables from the environment are not used.

Outcomes of a call, by what is known about the request::

    host refused (not public, not allowed)          NotApplied
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
import ipaddress
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import httpx

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import OpenOptions, PublishedVersion, StatusAnswer
from sagas.destinations.slugs import check_key
from sagas.destinations.webhook_urls import (
    DEFAULT_PORTS,
    IPAddress,
    WebhookAllow,
    canonical_url,
    host_refusal,
)

# host, port -> the addresses the host resolves to, in the order to try them.
Resolver = Callable[[str, int], list[IPAddress]]

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

if TYPE_CHECKING:
    from orchestrator.core.config import Settings


def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses `getaddrinfo` gives for `host` (an address literal is itself), no duplicates."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


@dataclass(frozen=True)
class Pinned:
    """Where a call goes: the checked address, and the name the server is asked for."""

    url: httpx.URL  # the webhook URL with its host replaced by the checked address
    host_header: str
    server_name: str | None  # TLS SNI and certificate name (None for an address literal)


def pin(url: str, allow: WebhookAllow, resolver: Resolver = system_resolver) -> Pinned:
    """Resolve `url`'s host and check every address; the call's target. `HostRefused` if not allowed."""
    target = httpx.URL(url)
    host = target.host
    port = target.port or DEFAULT_PORTS[target.scheme]
    try:
        addresses = resolver(host, port)
    except (OSError, UnicodeError) as exc:
        raise HostRefused(f"{host} does not resolve ({exc})") from None
    why = host_refusal(host, addresses, allow)
    if why is not None:
        raise HostRefused(why)
    literal = host == str(addresses[0])
    return Pinned(
        url=target.copy_with(host=str(addresses[0])),
        host_header=target.netloc.decode("ascii"),
        server_name=None if literal else host,
    )


class HostRefused(Exception):
    """The webhook's host may not be called (its reason is the message)."""


def check_host(url: str, allow: WebhookAllow, resolver: Resolver = system_resolver) -> None:
    """At submit: `InvalidInput` naming the destination when its host may not be called now."""
    try:
        pin(canonical_url(url), allow, resolver)
    except HostRefused as exc:
        raise InvalidInput(f"webhook:{url}: {exc}", target=url) from None


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
    file_based: ClassVar[bool] = False
    reversible: ClassVar[bool] = True
    test_only: ClassVar[bool] = False

    def __init__(
        self,
        url: str,
        *,
        uri: str | None = None,
        timeout: float = 10.0,
        allow: WebhookAllow | None = None,
        resolver: Resolver = system_resolver,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.url = canonical_url(url)
        self.uri = uri or f"webhook:{self.url}"
        self.timeout = timeout
        self.allow = allow or WebhookAllow()
        self.resolver = resolver
        self.tls = tls  # None: the system's certificate authorities

    @classmethod
    def check_target(cls, target: str) -> None:
        canonical_url(target)  # InvalidInput naming the URL

    @classmethod
    def canonical(cls, target: str) -> str:
        return canonical_url(target)

    @classmethod
    def check_at_submit(cls, target: str, settings: Settings) -> None:
        """The host must be one that may be called now (resolved anew before each call)."""
        check_host(target, WebhookAllow.parse(settings.webhook_allow))

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float, options: OpenOptions) -> WebhookDestination:
        return cls(target, uri=uri, timeout=timeout, allow=options.webhook_allow)

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
        except NotApplied as exc:  # the host may not be called now: nobody was asked
            return StatusAnswer(kind="unknown", detail=str(exc))
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
        try:
            target = pin(self.url, self.allow, self.resolver)
        except HostRefused as exc:
            raise NotApplied(f"{self.uri}: {exc}; nothing was sent", uri=self.uri, key=key) from None
        headers = {IDEMPOTENCY_HEADER: key, "Accept": "application/json", "Host": target.host_header}
        extensions = {"sni_hostname": target.server_name} if target.server_name else {}
        # One TLS context per process: building one loads the CA bundle (~25 ms). No proxy from
        # the environment: the connection goes to the address just checked, or nowhere.
        with httpx.Client(
            timeout=self.timeout, follow_redirects=False, verify=self.tls or _tls_context(), trust_env=False
        ) as client:
            return client.request(method, target.url, headers=headers, json=body, extensions=extensions)

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


__all__ = [
    "IDEMPOTENCY_HEADER",
    "HostRefused",
    "Pinned",
    "Resolver",
    "WebhookDestination",
    "check_host",
    "pin",
    "receipt_of",
    "system_resolver",
]
